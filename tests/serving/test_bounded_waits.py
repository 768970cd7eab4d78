"""Bounded waits on a gate's server: a stall ends the gate (exit 5), a request past its timeout is exit 6,
and either way the answered requests are kept, so the re-run sends only the others and records the same
result as an uninterrupted run.

The server is a small fake (tests/fake_openai.py): a real vLLM server cannot be made to stall or to be
slow on demand. lm-eval itself runs for real, in this process, against it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode, HfreleaseError, ServerError
from hfrelease.evaluation import timeouts
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from hfrelease.serving.alarm import Alarm
from tests.conftest import CliRun
from tests.fake_openai import FakeOpenAI

# lm-eval records its git commit for provenance by running `git`: harmless, and not this test's subject.
pytestmark = [pytest.mark.unit, pytest.mark.allow_subprocess]

MODEL = "tester/Tiny-Ref"
QUESTIONS = 12

MANIFEST = """\
schema_version = 1

[family]
name = "tiny"
display_name = "Tiny"
base_model = "tester/Tiny"
owner = "tester"
license = "mit"
languages = ["en"]
version = "1.0"

[[family.authors]]
name = "Test Author"
handle = "tester"

[family.citation]
key = "tester2026tiny"
title = "Tiny"
year = 2026
url = "https://huggingface.co/tester"

[[artifact]]
id = "ref"
kind = "reference"
repo = "tester/Tiny-Ref"
publish = false
source = { path = "checkpoints/ref" }

[[gate]]
id = "sum"
task = "tiny_sum"
task_dir = "tasks"
mode = "non-thinking"
max_tokens = 8
metric = "exact_match,none"
margin = 0.05
num_concurrent = 2
"""

TASK = """\
task: tiny_sum
dataset_path: json
dataset_kwargs:
  data_files:
    test: "{data}"
test_split: test
output_type: generate_until
doc_to_text: question
doc_to_target: answer
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  temperature: 0.0
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def make_family(root: Path, *, request_timeout: float | None = None) -> Path:
    """A one-artifact, one-gate family whose gate is a small lm-eval task over local JSON lines."""
    family = root / "family"
    (family / "checkpoints" / "ref").mkdir(parents=True)
    (family / "checkpoints" / "ref" / "config.json").write_text("{}")
    (family / "checkpoints" / "ref" / "model.safetensors").write_bytes(b"\0" * 64)
    (family / "results").mkdir()
    tasks = family / "tasks"
    tasks.mkdir()
    data = tasks / "tiny_sum.jsonl"
    # Every third answer is wrong ("+ 1" in the target), so the score is neither 0 nor 1.
    data.write_text("".join(json.dumps({"question": f"What is {i} + {i + 1}?",
                                        "answer": str(2 * i + 1 + (i % 3 == 0))}) + "\n"
                            for i in range(QUESTIONS)))
    (tasks / "tiny_sum.yaml").write_text(TASK.format(data=data))
    text = MANIFEST + (f"request_timeout = {request_timeout}\n" if request_timeout is not None else "")
    (family / "release.toml").write_text(text)
    return family


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """hfrelease's cache (request cache included) in the test's directory."""
    home = tmp_path / "hfrelease-cache"
    monkeypatch.setenv("HFRELEASE_CACHE", str(home))
    return home


@pytest.fixture
def servers() -> Iterator[list[FakeOpenAI]]:
    """Fake servers, stopped after the test."""
    made: list[FakeOpenAI] = []
    yield made
    for server in made:
        server.stop()


def run_gate(cli: CliRun, family: Path, server: FakeOpenAI, tmp_path: Path) -> tuple[int, str, str]:
    return cli(["eval", str(family), "--artifact", "ref", "--endpoint", server.url, "--json",
                "--run-dir", str(tmp_path / "runs" / str(time.monotonic_ns()))])


def recorded(family: Path) -> dict[str, object]:
    """The one gate record's result: value, samples (doc id, score, response, cut off) and request counts."""
    ledger = Ledger(family / "results")
    (record,) = ledger.records(kind="gate")
    samples = sorted((s.doc_id, s.score, s.response, s.truncated) for s in ledger.load_samples(record))
    return {"value": record.extra["value"], "samples": samples, "requests": record.extra["requests"],
            "resumed": record.extra.get("resumed", 0)}


def test_request_timeout_is_derived_from_the_budget_and_configurable(tmp_path: Path) -> None:
    """Without request_timeout the gate's timeout grows with max_tokens; the manifest key replaces it."""
    gate = load_manifest(make_family(tmp_path)).gate[0]
    assert timeouts.gate_request_timeout(gate) == timeouts.budget_timeout(8)
    assert timeouts.budget_timeout(8192) > timeouts.budget_timeout(64) >= timeouts.BASE_SECONDS
    other = load_manifest(make_family(tmp_path / "b", request_timeout=12.5)).gate[0]
    assert timeouts.gate_request_timeout(other) == 12.5


@pytest.mark.parametrize("value", ["0", "-1", '"60"', "100000"])
def test_check_refuses_a_bad_request_timeout(tmp_path: Path, cli: CliRun, value: str) -> None:
    """request_timeout must be a positive number of seconds (at most a day): `check` says where."""
    family = make_family(tmp_path)
    (family / "release.toml").write_text((family / "release.toml").read_text() + f"request_timeout = {value}\n")
    code, _, err = cli(["check", str(family), "--no-preflight"])
    assert code == ExitCode.CONFIG
    assert "gate[0].request_timeout" in err


def test_stalled_server_ends_the_gate_and_the_rerun_resumes(
    tmp_path: Path, cli: CliRun, cache_home: Path, servers: list[FakeOpenAI], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that stops answering mid-gate: exit 5 well before the request timeout; the re-run sends only
    the unanswered requests and records what an uninterrupted run records."""
    monkeypatch.setattr(timeouts, "STALL_SECONDS", 2.0)
    family = make_family(tmp_path, request_timeout=120)
    stalling = FakeOpenAI(model=MODEL, answer_limit=5, keep_alive=True, metrics=True).start()
    servers.append(stalling)
    started = time.monotonic()
    code, _, err = run_gate(cli, family, stalling, tmp_path)
    assert code == ExitCode.SERVER_FAILED, err
    assert "stopped answering" in err and "resumes" in err
    assert time.monotonic() - started < 90  # bounded: nowhere near the 120 s request timeout and its retries
    assert not list((family / "results").rglob("*.json"))
    assert stalling.answered == 5

    healthy = FakeOpenAI(model=MODEL, keep_alive=True, metrics=True).start()
    servers.append(healthy)
    code, _, err = run_gate(cli, family, healthy, tmp_path)
    assert code == ExitCode.OK, err
    assert healthy.answered == QUESTIONS - 5  # only what the stalled run never got
    resumed = recorded(family)
    assert (resumed["requests"], resumed["resumed"]) == (QUESTIONS - 5, 5)
    assert not list((cache_home / "requests").glob("*.db"))  # the record holds the answers now

    uninterrupted_family = make_family(tmp_path / "uninterrupted", request_timeout=120)
    fresh = FakeOpenAI(model=MODEL, keep_alive=True, metrics=True).start()
    servers.append(fresh)
    assert run_gate(cli, uninterrupted_family, fresh, tmp_path)[0] == ExitCode.OK
    uninterrupted = recorded(uninterrupted_family)
    assert (uninterrupted["requests"], uninterrupted["resumed"]) == (QUESTIONS, 0)
    assert resumed["value"] == uninterrupted["value"] and 0 < float(str(resumed["value"])) < 1
    assert resumed["samples"] == uninterrupted["samples"]


def test_request_past_its_timeout_is_a_measurement_failure(
    tmp_path: Path, cli: CliRun, cache_home: Path, servers: list[FakeOpenAI],
) -> None:
    """A server that keeps generating but answers slower than request_timeout: exit 6 naming the timeout."""
    family = make_family(tmp_path, request_timeout=1)
    slow = FakeOpenAI(model=MODEL, delay=4.0, keep_alive=True, metrics=True).start()
    servers.append(slow)
    started = time.monotonic()
    code, _, err = run_gate(cli, family, slow, tmp_path)
    assert code == ExitCode.MEASUREMENT_FAILED, err
    assert "timeout" in err and "request_timeout" in err
    assert time.monotonic() - started < 90
    assert not list((family / "results").rglob("*.json"))


def test_forced_rerun_does_not_reuse_answers(
    tmp_path: Path, cli: CliRun, cache_home: Path, servers: list[FakeOpenAI], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With --force an interrupted run's answers are dropped: every request is sent again."""
    monkeypatch.setattr(timeouts, "STALL_SECONDS", 2.0)
    family = make_family(tmp_path, request_timeout=120)
    stalling = FakeOpenAI(model=MODEL, answer_limit=4, keep_alive=True, metrics=True).start()
    servers.append(stalling)
    assert run_gate(cli, family, stalling, tmp_path)[0] == ExitCode.SERVER_FAILED
    healthy = FakeOpenAI(model=MODEL, keep_alive=True, metrics=True).start()
    servers.append(healthy)
    code, _, err = cli(["eval", str(family), "--artifact", "ref", "--endpoint", healthy.url, "--force",
                        "--run-dir", str(tmp_path / "runs" / "forced")])
    assert code == ExitCode.OK, err
    assert healthy.answered == QUESTIONS
    assert recorded(family)["resumed"] == 0


def test_benchmark_that_never_finishes_is_a_void_point(
    tmp_path: Path, servers: list[FakeOpenAI], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `vllm bench serve` that never returns while the server keeps counting tokens ends at its time limit
    (requests / concurrency waves of request_timeout) as a MeasurementError, which voids the point."""
    from hfrelease.errors import MeasurementError
    from hfrelease.manifest import Workload
    from hfrelease.serving.command import ServeCommand
    from hfrelease.serving.process import VllmServer
    from hfrelease.speed import runner
    from hfrelease.speed.plan import PointJob
    from tests.serving.test_server_death import FakeProcess

    busy = FakeOpenAI(model=MODEL, delay=1.0, keep_alive=True, metrics=True).start()
    busy.in_flight = 1  # its token counters move on every scrape: working, not stalled
    servers.append(busy)
    port = int(busy.url.rsplit(":", 1)[1])
    server = VllmServer(ServeCommand(argv=("vllm", "serve", "m"), served_model_name=MODEL),
                        log_path=tmp_path / "server.log", port=port, base_env={}, popen=lambda *a, **k: FakeProcess())
    server.start()
    workload = Workload.model_validate({"id": "w", "prompts": "p.jsonl", "output_len": 8, "request_timeout": 0.5})
    point = PointJob(workload=workload, concurrency=2, num_prompts=4, prompts_sha256="", input_key="", recorded=None)
    monkeypatch.setattr(runner, "BENCH_START_SECONDS", 0.5)
    assert runner.bench_time_limit(point, 4) == 2.0  # (4 / 2 + 1) waves of 0.5 s, plus the start

    def never_returns(argv: object, log_path: object) -> None:
        while True:
            time.sleep(0.1)

    started = time.monotonic()
    with pytest.raises(MeasurementError, match="did not finish within"):
        runner._bench(server, never_returns, ["vllm", "bench", "serve"], tmp_path / "bench.log", point=point,
                      requests=4)
    assert time.monotonic() - started < 30
    server.stop()


class RecordingAlarm(Alarm):
    """An alarm that records its reason instead of interrupting the test's main thread."""

    def ring(self, reason: HfreleaseError) -> bool:
        self.reason = reason
        return True


@pytest.mark.parametrize(
    ("done_total", "counters", "rings"),
    [
        ((3, 8), "frozen", True),  # requests outstanding, the engine computes nothing: a stall
        ((3, 8), "moving", False),  # requests outstanding, tokens being generated: slow, not stalled
        ((8, 8), "frozen", False),  # nothing awaited (between tasks): never a stall
        ((3, 8), "absent", True),  # no vLLM counters: no answer for the request timeout is a stall
    ],
)
def test_stall_watch_rings_only_when_nothing_moves(done_total: tuple[int, int], counters: str, rings: bool) -> None:
    """The stall watchdog rings (a ServerError) only when requests are outstanding and nothing progresses."""
    from hfrelease.serving.stall import Progress, StallWatch

    progress = Progress()
    progress.update(*done_total)
    ticks = iter(range(1_000_000))

    def probe(url: str) -> float | None:
        return None if counters == "absent" else float(next(ticks)) if counters == "moving" else 5.0

    alarm = RecordingAlarm()
    alarm.arm()
    with StallWatch(base_url="http://127.0.0.1:1", progress=progress, alarm=alarm, window=0.2, fallback_window=0.3,
                    probe=probe, poll=0.02, probe_every=0.05):
        time.sleep(1.0)
    assert (alarm.reason is not None) == rings
    if rings:
        assert isinstance(alarm.reason, ServerError) and "stopped answering" in alarm.reason.message


def test_an_alarm_interrupts_whatever_sigint_handler_was_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT handler some library left behind cannot swallow the alarm: armed, the interrupt lands as
    KeyboardInterrupt, and the handler is put back when disarmed."""
    import signal

    from hfrelease.errors import ServerError
    from hfrelease.serving.alarm import Alarm

    def left_behind(*_: object) -> None:
        return None

    previous = signal.signal(signal.SIGINT, left_behind)
    try:
        alarm = Alarm()
        alarm.arm()
        with pytest.raises(KeyboardInterrupt):
            alarm.ring(ServerError("stalled"))
            time.sleep(5)  # the interrupt lands at the next bytecode boundary
        alarm.disarm()
        assert signal.getsignal(signal.SIGINT) is left_behind
    finally:
        signal.signal(signal.SIGINT, previous)
