"""A SIGKILLed hfrelease leaves no vLLM server behind, and its interrupted gate resumes from the requests
that were answered, recording what an uninterrupted run records."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.ledger.store import Ledger
from tests.demo_session import ROOT, marked_env, nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]
# The int8 quant: on an Intel Xeon with AMX the FP8 quant serves 150x slower (oneDNN's reference FP8 matmul, see
# README "The FP8 quant on an Intel Xeon with AMX"), and what is tested here is the kill and the resume.
GATE = ("--artifact", "w8a8-int8", "--gate", "arith")


def eval_command(family: Path) -> list[str]:
    return [sys.executable, "-m", "hfrelease", "eval", str(family), *GATE, "--json"]


def environment(mark: Path, cache: Path) -> dict[str, str]:
    """The test's mark on everything hfrelease starts, and hfrelease's cache (request cache, server records)."""
    return {**marked_env(mark), "HFRELEASE_CACHE": str(cache)}


def gate_result(family: Path) -> tuple[dict[str, object], list[tuple[str, float, str]]]:
    """The one record's provenance counts and value, and its samples (doc id, score, response)."""
    ledger = Ledger(family / "results")
    (record,) = ledger.records(kind="gate")
    samples = sorted((s.doc_id, s.score, s.response) for s in ledger.load_samples(record))
    counts = {"value": record.extra["value"], "requests": record.extra["requests"],
              "resumed": record.extra.get("resumed", 0), "n": record.n, "key": record.input_key}
    return counts, samples


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on `port` (as vLLM does: SO_REUSEADDR, so the closed connections'
    TIME_WAIT entries do not count, a listener does)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            probe.listen(1)
        except OSError:
            return False
        return True


def test_sigkilled_hfrelease_leaves_no_server_and_the_gate_resumes(demo_family: Path, tmp_path: Path) -> None:
    """SIGKILL hfrelease mid-gate: its server and engine are gone and the port is free; the re-run sends only
    the unanswered requests, and its record equals an uninterrupted run's."""
    # A second copy of the family, at the same depth (its task paths reach the same build/), measured whole.
    whole = tmp_path / "whole"
    shutil.copytree(demo_family, whole / "model_cards" / "demo")
    (whole / "build").symlink_to(ROOT / "build")
    cache = tmp_path / "hfrelease-cache"
    process = subprocess.Popen(eval_command(demo_family), cwd=tmp_path, env=environment(tmp_path, cache),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal_dir = cache / "requests"
    deadline = time.monotonic() + 600
    answered = 0
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1][-3000:]
        answered = sum(len(p.read_text().splitlines()) for p in journal_dir.glob("*.finish.jsonl"))
        if answered >= 10:
            break
        time.sleep(0.05)
    assert answered >= 10, "the gate never got going"
    (record,) = (cache / "servers").glob("*.json")
    port = int(json.loads(record.read_text())["port"])
    process.send_signal(signal.SIGKILL)  # hfrelease alone: nothing gets a chance to clean up
    process.wait()
    assert nothing_left(tmp_path, timeout=60)  # server, engine processes and the reaper all gone
    assert port_is_free(port)
    assert not list((demo_family / "results").rglob("*.json"))

    again = subprocess.run(eval_command(demo_family), cwd=tmp_path, env=environment(tmp_path, cache),
                           capture_output=True, text=True, timeout=900, check=False)
    assert again.returncode in (ExitCode.OK, ExitCode.GATE_FAILED), again.stderr[-3000:]
    resumed, resumed_samples = gate_result(demo_family)
    assert int(str(resumed["resumed"])) >= 10
    assert int(str(resumed["requests"])) + int(str(resumed["resumed"])) == resumed["n"]
    assert not list((cache / "servers").glob("*.json"))
    assert nothing_left(tmp_path)

    full = subprocess.run(eval_command(whole / "model_cards" / "demo"), cwd=tmp_path,
                          env=environment(tmp_path, tmp_path / "other-cache"), capture_output=True, text=True,
                          timeout=900, check=False)
    assert full.returncode in (ExitCode.OK, ExitCode.GATE_FAILED), full.stderr[-3000:]
    uninterrupted, uninterrupted_samples = gate_result(whole / "model_cards" / "demo")
    assert (uninterrupted["requests"], uninterrupted["resumed"]) == (uninterrupted["n"], 0)
    assert resumed["key"] == uninterrupted["key"]
    assert resumed["value"] == uninterrupted["value"]
    assert resumed_samples == uninterrupted_samples
