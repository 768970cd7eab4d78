"""`hfrelease eval --endpoint` against a server that fails: each failure has its class and exit code.

A fake OpenAI-compatible server (tests/fake_openai.py) stands in for vLLM, which cannot be made
to answer 500s, lose its engine or die after N answers on cue; lm-eval itself runs for real.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hfrelease.errors import ExitCode, ServerError
from hfrelease.evaluation import server_job
from hfrelease.evaluation.events import NullEvents
from hfrelease.evaluation.failures import RequestsFailedError
from hfrelease.ledger.store import Ledger
from tests.conftest import CliRun
from tests.fake_openai import FakeOpenAI, Mode
from tests.serving.test_server_death import make_server

pytestmark = pytest.mark.usefixtures("lm_eval_logging")

FP8 = "tester/Fixture-1M-FP8-Dynamic"
BUG = "This is a bug in hfrelease"
NOISE = "Task exception was never retrieved"


def eval_attached(cli: CliRun, family: Path, server: FakeOpenAI, run_dir: Path,
                  artifact: str = "fp8") -> tuple[int, dict[str, Any], str]:  # fmt: skip
    """`hfrelease eval --endpoint URL --json`: (exit code, the JSON on stdout, stderr)."""
    code, out, err = cli(["eval", str(family), "--artifact", artifact, "--gate", "arith", "--endpoint", server.url,
                          "--run-dir", str(run_dir), "--json"])  # fmt: skip
    assert BUG not in err and NOISE not in err, err
    assert NOISE not in (run_dir / "lm-eval.log").read_text(errors="replace")
    return code, json.loads(out), err


def test_permanent_500s_void_the_gate_saying_how_many_failed(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """Every request answered 500 by a live server: exit 6 saying how many failed and how, one message, JSON."""
    server = fake_server(FP8, mode="error500").start()
    code, report, err = eval_attached(cli, gate_family, server, tmp_path / "run")
    assert code == ExitCode.MEASUREMENT_FAILED == report["exit_code"]
    message = report["error"]["message"]
    assert "requests failed after 3 attempts each (HTTP 500 Internal Server Error: " in message
    assert "the rest were not sent" in message and err.count("error:") == 1
    # Stopped once more failed than max_truncated allows (1 of 20): lm-eval sends each request's first two
    # attempts, then third attempts only until the second failure is counted: the two that fail and at most
    # num_concurrent - 1 = 3 others in flight beside the second. Checked before sending, not before queueing
    # (all 60 were sent when the check came before lm-eval's semaphore, on a slow host).
    assert server.requests <= 20 * 2 + 2 + 3 < 20 * 3
    assert Ledger(gate_family / "results").records(kind="gate") == []  # nothing recorded: the re-run measures it


def test_dead_engine_of_a_live_process_is_server_death(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """503 on every request and on /health (vLLM's API process alive, its engine dead): exit 5, one message,
    and the JSON on stdout says so."""
    server = fake_server(FP8, mode="engine-dead").start()
    code, report, err = eval_attached(cli, gate_family, server, tmp_path / "run")
    assert code == ExitCode.SERVER_FAILED == report["exit_code"]
    assert "engine is dead" in report["error"]["message"] and "HTTP 503" in report["error"]["message"]
    assert err.count("error:") == 1 and "engine is dead" in err


def test_attached_endpoint_dying_mid_gate_is_server_death(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """The attached server answers 5 requests, then its port closes: exit 5, valid JSON, nothing recorded."""
    server = fake_server(FP8, die_after=5).start()
    code, report, err = eval_attached(cli, gate_family, server, tmp_path / "run")
    assert code == ExitCode.SERVER_FAILED == report["exit_code"]
    assert "no longer answers" in report["error"]["message"] and "connection refused" in report["error"]["message"]
    assert "--endpoint" in report["error"]["hint"]
    assert err.count("error:") == 1
    assert Ledger(gate_family / "results").records(kind="gate") == []


def test_a_failure_within_max_truncated_is_counted_and_the_gate_measured(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """One of 20 prompts always fails (within 5 %): the gate is measured, that sample scored as no answer,
    and the record keeps the failure by kind."""
    server = fake_server(FP8, failing_prompts=frozenset({"What is 3 + 4?"})).start()
    code, report, _ = eval_attached(cli, gate_family, server, tmp_path / "run")
    assert code == ExitCode.OK, report
    [row] = report["rows"]
    assert row["status"] == "ok" and row["value"] == 19 / 20 and row["empty"] == 1
    [record] = Ledger(gate_family / "results").records(kind="gate")
    assert record.extra["failed_requests"] == {"HTTP 500 Internal Server Error": 1}


def _stopped(base_url: str) -> RequestsFailedError:
    return RequestsFailedError(gate="g", failed=2, total=20, kinds={"HTTP 503 Service Unavailable": 2}, attempts=3,
                               allowed=1, base_url=base_url)  # fmt: skip


@pytest.mark.parametrize(("mode", "expected"), [("engine-dead", ServerError), ("error500", RequestsFailedError)])
def test_a_started_server_whose_process_lives_is_judged_by_its_health(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_server: type[FakeOpenAI], mode: Mode,
    expected: type[Exception],
) -> None:
    """A server hfrelease started, its process alive, whose requests failed: dead engine (/health 503) is exit 5,
    a server that still serves keeps the gate's failure (exit 6). The fake stands in for the live vLLM."""
    server, _ = make_server(tmp_path)
    fake = fake_server(FP8, mode=mode).start()

    def measure(*args: Any, **kwargs: Any) -> Any:
        raise _stopped(fake.url)

    monkeypatch.setattr(server_job, "_measure", measure)
    gate = SimpleNamespace(id="g", request_timeout=60.0, is_fidelity=False)
    job = SimpleNamespace(pending=[SimpleNamespace(gate=gate, label="g")], artifact=SimpleNamespace(id="a", repo="o/m"),
                          model_dir=tmp_path)
    with pytest.raises(expected) as caught:
        server_job.run_gates(SimpleNamespace(), job, fake.url, server, None,  # type: ignore[arg-type]
                          ledger=None, events=NullEvents(), measured={}, log_dir=tmp_path)  # type: ignore[arg-type]
    code = ExitCode.SERVER_FAILED if expected is ServerError else ExitCode.MEASUREMENT_FAILED
    assert caught.value.exit_code == code  # type: ignore[attr-defined]
    server.stop()


def test_sequential_requests_stop_at_the_first_failure(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """num_concurrent = 1 (lm-eval's sequential path, which has no stand-in answer): 500s stop the gate at the
    first request that fails after every attempt, exit 6, one message and JSON."""
    manifest = gate_family / "release.toml"
    manifest.write_text(manifest.read_text().replace("num_concurrent = 4", "num_concurrent = 1"))
    server = fake_server(FP8, mode="error500").start()
    code, report, err = eval_attached(cli, gate_family, server, tmp_path / "run")
    assert code == ExitCode.MEASUREMENT_FAILED == report["exit_code"], err
    assert "1 of 20 requests failed after 3 attempts each (HTTP 500" in report["error"]["message"]
    assert "one at a time" in report["error"]["message"]
    assert server.requests == 3 and err.count("error:") == 1


@pytest.mark.parametrize(("mode", "advice", "not_advice"), [
    ("null-content", "ended by the server, not the budget", "raise max_tokens"),
    ("cut-off", "raise max_tokens", "ended by the server"),
])
def test_empty_answers_are_void_with_the_advice_that_fits(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path, mode: Mode, advice: str,
    not_advice: str,
) -> None:
    """Empty answers void the gate (exit 6); "raise max_tokens" only for answers the budget cut off, never for
    null contents the server ended itself."""
    server = fake_server(FP8, mode=mode).start()
    code, report, _ = eval_attached(cli, gate_family, server, tmp_path / "run")
    assert code == ExitCode.MEASUREMENT_FAILED
    reason = report["rows"][0]["reason"]
    assert advice in reason and not_advice not in reason, reason


def test_a_request_queued_when_the_gate_stops_is_not_sent() -> None:
    """lm-eval starts every request's task at once and each waits on lm-eval's semaphore: a request still
    waiting when the failures pass the gate's share is answered as failed without being sent. (The stand-in
    base class keeps lm-eval's semaphore contract -- release only what `acquire` took -- and records sends:
    the order of the check and the wait is what is tested, which no server can be made to show on demand.)"""
    import asyncio

    from hfrelease.evaluation.lm_eval_gate import FAILED_ANSWER, _Counted, _Observer

    sent: list[Any] = []

    class LmEvalShape:
        async def amodel_call(self, session: Any, sem: Any, messages: Any, **kwargs: Any) -> Any:
            acquired = await sem.acquire()
            try:
                sent.append(messages)
                return ["an answer"]
            finally:
                if acquired:
                    sem.release()

    class Model(_Counted, LmEvalShape):
        pass

    async def scenario() -> list[Any]:
        model = Model()
        model.observer, model.max_retries, model._concurrent = _Observer(total=2), 3, 1
        sem = asyncio.Semaphore(1)
        await sem.acquire()  # another request is being answered
        queued = asyncio.create_task(model.amodel_call(session=None, sem=sem, messages=["q"]))
        await asyncio.sleep(0.05)  # the task now waits on the semaphore
        model.observer.failed("HTTP 500", 2)  # ... and the answered request's failure stops the gate
        sem.release()
        answer = await queued
        assert not sem.locked()  # the semaphore was given back
        return list(answer)

    assert asyncio.run(scenario()) == [FAILED_ANSWER] and sent == []
