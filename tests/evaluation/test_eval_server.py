"""`hfrelease eval --endpoint` against one real vLLM server shared by this module's tests.

The server serves the demo reference; the tests compare hfrelease's recorded values with lm-eval's own
command line run against the same server, count the requests a warm re-run sends (zero, read from the
server's own metrics), refuse a server serving another model, and merge ledgers from "two machines".
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.evaluation.plan import describe_gate, model_files, plan_eval
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from hfrelease.serving.command import build_serve_command
from hfrelease.serving.plugin import ensure_plugin
from hfrelease.serving.process import Endpoint, VllmServer, free_port, get_json

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]
ROOT = Path(__file__).resolve().parents[2]


def hfrelease(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hfrelease", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def server(demo_build: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """The demo reference served once for the whole module."""
    manifest = load_manifest(ROOT / "model_cards" / "demo")
    reference = manifest.reference
    port = free_port()
    command = build_serve_command(manifest, reference, model=str(demo_build["reference"]), host="127.0.0.1",
                                  port=port, vllm=str(Path(sys.executable).with_name("vllm")))
    assert command.plugin
    ensure_plugin(manifest.resolve(command.plugin))
    log = tmp_path_factory.mktemp("server") / "reference.log"
    with VllmServer(command, log_path=log, port=port) as running:
        running.wait_until_ready()
        yield running.endpoint


def requests_served(endpoint: Endpoint) -> float:
    """Requests the server has finished, from its Prometheus metrics (the server's own count)."""
    with urllib.request.urlopen(f"{endpoint.base_url}/metrics", timeout=10) as response:  # noqa: S310 - loopback
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_values_equal_lm_eval_and_warm_rerun_is_free(server: Endpoint, demo_family: Path, tmp_path: Path) -> None:
    """Recorded values equal lm-eval's own CLI run with the same settings; a warm re-run sends no request."""
    args = ["eval", str(demo_family), "--artifact", "reference", "--endpoint", server.base_url,
            "--gate", "arith-nothink", "--gate", "mc", "--json", "--run-dir", str(tmp_path / "run")]
    first = hfrelease(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = {r["gate_id"]: r for r in json.loads(first.stdout)["rows"]}

    manifest = load_manifest(demo_family)
    plan = plan_eval(manifest, ledger=Ledger(demo_family / "results"), hash_cache=None, artifacts=["reference"],
                     gates=["arith-nothink", "mc"])
    for job in plan.servers[0].gates:
        out = tmp_path / f"lm-eval-{job.gate.id}"
        files = model_files(plan.servers[0].artifact, plan.servers[0].model_dir)
        line = describe_gate(manifest, job, base_url=server.base_url, model=server.model, files=files)
        argv = [a.replace("<run dir>", str(out)) for a in shlex.split(line)]
        argv[0] = str(Path(sys.executable).with_name("lm_eval"))
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads(next(out.rglob("results_*.json")).read_text())
        value = results["results"][job.gate.task][job.gate.metric]
        assert rows[job.gate.id]["value"] == pytest.approx(value, abs=1e-12)

    before = requests_served(server)
    again = hfrelease(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["requests_sent"] == 0
    assert requests_served(server) == before


def test_printed_lm_eval_line_gives_the_recorded_responses(server: Endpoint, demo_family: Path, tmp_path: Path) -> None:
    """The `lm_eval` line `eval --dry-run` prints for the thinking gate, run by hand through the shell against the
    server, gives for each sample the response hfrelease's own gate call recorded (think block cut off alike)."""
    import tomllib

    import tomli_w

    path = demo_family / "release.toml"
    data = tomllib.loads(path.read_text())
    next(g for g in data["gate"] if g["id"] == "arith")["limit"] = 8  # short: 8 prompts each way
    path.write_text(tomli_w.dumps(data))
    select = ["--artifact", "reference", "--gate", "arith"]
    dry = hfrelease("eval", str(demo_family), *select, "--dry-run", "--json", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-3000:]
    line = json.loads(dry.stdout)["servers"][0]["gates"][0]["command"]
    by_hand = tmp_path / "by-hand"
    line = line.replace("http://127.0.0.1:<port>", server.base_url).replace("<run dir>", str(by_hand))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,  # noqa: S602
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]

    ours = hfrelease("eval", str(demo_family), *select, "--endpoint", server.base_url, "--json", cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr[-3000:]
    ledger = Ledger(demo_family / "results")
    recorded = {s.doc_id: s.response for s in ledger.load_samples(ledger.records(kind="gate")[0])}
    theirs: dict[str, str] = {}
    for text in next(by_hand.rglob("samples_demo_arith_*.jsonl")).read_text().splitlines():
        sample = json.loads(text)
        if sample["filter"] == "answer":  # the gate's metric is exact_match,answer
            theirs[str(sample["doc_id"])] = sample["resps"][0][0]
    assert len(theirs) == 8
    assert theirs == recorded
    assert not any("</think>" in response for response in theirs.values())


def test_server_with_another_model_is_refused(server: Endpoint, demo_family: Path, tmp_path: Path) -> None:
    """Attaching the fp8 artifact to a server that serves the reference is refused before any request."""
    result = hfrelease("eval", str(demo_family), "--artifact", "fp8-dynamic", "--endpoint", server.base_url,
                       cwd=tmp_path)
    assert result.returncode == ExitCode.SERVER_FAILED
    assert "refusing to measure it" in result.stderr
    assert not list((demo_family / "results").rglob("*.json"))


def test_server_that_never_answers_is_bounded(demo_family: Path, tmp_path: Path) -> None:
    """A server that accepts connections and never answers is reported within a bounded time."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        result = hfrelease("eval", str(demo_family), "--artifact", "reference", "--endpoint",
                           f"http://127.0.0.1:{listener.getsockname()[1]}", cwd=tmp_path, timeout=120)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()
    assert result.returncode == ExitCode.SERVER_FAILED
    assert "did not answer" in result.stderr
    assert elapsed < 60


def test_ledgers_from_two_machines_merge(server: Endpoint, demo_family: Path, tmp_path: Path) -> None:
    """Records written in two directories ("machines") merge without conflict or loss, twice over."""
    machine_b = tmp_path / "machine-b"
    family_b = machine_b / "model_cards" / "demo"
    shutil.copytree(demo_family, family_b)
    (machine_b / "build").symlink_to(ROOT / "build")
    for family in (demo_family, family_b):
        result = hfrelease("eval", str(family), "--artifact", "reference", "--endpoint", server.base_url,
                           "--gate", "json", "--force", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    merged = tmp_path / "merged"
    for _ in range(2):
        result = hfrelease("ledger", "merge", str(demo_family / "results"), str(family_b / "results"),
                           "--into", str(merged), "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["added"] == [] and len(report["identical"]) == 2
    records = Ledger(merged).records(kind="gate")
    assert len(records) == 2
    assert {r.artifact_id for r in records} == {"reference"}
    assert len({r.started_at for r in records}) == 2
    assert get_json(f"{server.base_url}/v1/models", timeout=10)["data"][0]["id"] == server.model


def test_cut_off_answers_void_the_gate(server: Endpoint, demo_family: Path, tmp_path: Path) -> None:
    """A budget too small for the thinking answers makes a void measurement (exit 6), never a low score."""
    import tomllib

    import tomli_w

    path = demo_family / "release.toml"
    data = tomllib.loads(path.read_text())
    next(g for g in data["gate"] if g["id"] == "arith")["max_tokens"] = 4
    path.write_text(tomli_w.dumps(data))
    result = hfrelease("eval", str(demo_family), "--artifact", "reference", "--endpoint", server.base_url,
                       "--gate", "arith", "--json", cwd=tmp_path)
    assert result.returncode == ExitCode.MEASUREMENT_FAILED, result.stderr[-2000:]
    row = json.loads(result.stdout)["rows"][0]
    assert row["verdict"] == "void" and row["truncated"] > 50
    assert "raise max_tokens" in row["reason"]
    record = Ledger(demo_family / "results").records(kind="gate")[0]
    assert record.status == "void" and record.truncated == row["truncated"]


def test_gates_at_once_score_as_one_at_a_time(server: Endpoint, demo_family: Path, tmp_path: Path) -> None:
    """The reference's lm-eval gates run one after another, then all at once within one budget, on one real
    server: per sample, at most a few answers differ (batch composition can change a greedy answer; the count is
    printed), and each gate's concurrent scores pass the gate against the sequential ones as reference."""
    import tomllib

    import tomli_w

    from hfrelease.ledger.record import Sample
    from hfrelease.verdicts.verdict import judge_samples

    path = demo_family / "release.toml"
    gates = ["arith", "arith-nothink", "mc"]
    samples: dict[str, dict[str, tuple[Sample, ...]]] = {}
    for schedule in ("sequential", "concurrent"):
        data = tomllib.loads(path.read_text())
        data["eval"] = {"schedule": schedule, "in_flight": 8}
        path.write_text(tomli_w.dumps(data))
        result = hfrelease("eval", str(demo_family), "--artifact", "reference", "--endpoint", server.base_url,
                           "--force", *[a for g in gates for a in ("--gate", g)], "--json",
                           "--run-dir", str(tmp_path / schedule), cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        load = json.loads(result.stdout)["loads"][0]
        assert load["schedule"] == schedule and load["utilization"]["generated_tokens"] > 0
        ledger = Ledger(demo_family / "results")
        samples[schedule] = {g: ledger.load_samples(ledger.records(artifact_id="reference", subject_id=g,
                                                                   kind="gate")[-1]) for g in gates}
    manifest = load_manifest(demo_family)
    for gate in manifest.gate:
        if gate.id not in gates:
            continue
        alone, together = samples["sequential"][gate.id], samples["concurrent"][gate.id]
        answers = {s.doc_id: (s.response, s.score) for s in together}
        differ = sum(1 for s in alone if answers.get(s.doc_id) != (s.response, s.score))
        print(f"{gate.id}: {differ} of {len(alone)} samples answered differently at once")
        assert differ <= len(alone) // 10
        assert judge_samples(gate, together, alone).verdict == "pass"
