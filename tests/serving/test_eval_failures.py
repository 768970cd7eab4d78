"""Servers that fail: bad arguments, missing models or plugins, and a server killed in the middle of a gate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from hfrelease.ledger.store import Ledger
from tests.demo_session import marked_env, nothing_left, vllm_servers

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]


def hfrelease(*args: str, cwd: Path, timeout: float = 900,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run hfrelease with the test's mark (its cwd, the test's tmp_path) on everything it starts."""
    return subprocess.run([sys.executable, "-m", "hfrelease", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**marked_env(cwd), **(env or {})})


def edit_manifest(family: Path, change: Any) -> None:
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    change(data)
    path.write_text(tomli_w.dumps(data))


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        # A value vLLM's parser accepts and its engine config refuses (an unknown option never gets this far:
        # the serve guard refuses it with vLLM's parser before anything starts, exit 3).
        (lambda d: d["serve"].__setitem__("args", ["--gpu-memory-utilization", "1.5"]), "bad argument"),
        (lambda d: d["artifact"][0].__setitem__("source", {"path": "../../empty-model"}), "model not found"),
        # The family's plugin may already be installed in this environment by an earlier test: VLLM_PLUGINS=none
        # keeps vLLM from loading it. Set in hfrelease's environment, which the server inherits: the manifest's
        # serve.env refuses VLLM_PLUGINS (it names code to load).
        (lambda d: d["serve"].pop("plugin"), "missing plugin"),
    ],
    ids=["bad-argument", "model-not-found", "missing-plugin"],
)
def test_start_failures_are_diagnosed(demo_family: Path, tmp_path: Path, change: Any, cause: str) -> None:
    """A server that cannot start is reported with its cause and log tail before any gate runs."""
    empty = tmp_path / "empty-model"
    empty.mkdir()
    (empty / "model.safetensors").write_bytes((demo_family.parent.parent / "build" / "demo" / "reference" /
                                               "model.safetensors").read_bytes())
    edit_manifest(demo_family, change)
    started = time.monotonic()
    result = hfrelease("eval", str(demo_family), "--artifact", "reference", "--gate", "mc", cwd=tmp_path,
                       env={"VLLM_PLUGINS": "none"} if cause == "missing plugin" else None)
    assert result.returncode == ExitCode.SERVER_FAILED, result.stderr[-3000:]
    assert f"before it became healthy: {cause}" in result.stderr, result.stderr[-3000:]
    assert "last lines of" in result.stderr
    assert not list((demo_family / "results").rglob("*.json"))
    assert nothing_left(tmp_path)
    assert time.monotonic() - started < 300


def test_server_killed_mid_gate(demo_family: Path, tmp_path: Path) -> None:
    """Killing vLLM during a gate: exit 5 with its cause, finished gates kept, nothing left, re-run completes."""
    # The four single-run gates: the seeded gate's three runs would add records and time, nothing to what is
    # tested here.
    edit_manifest(demo_family, lambda d: d.__setitem__(
        "gate", [g for g in d["gate"] if g["id"] in ("arith", "arith-nothink", "mc", "json")]))
    # The int8 quant: on an Intel Xeon with AMX the FP8 quant serves 150x slower (oneDNN's reference FP8 matmul,
    # README "The FP8 quant on an Intel Xeon with AMX"); the kill comes when the first gate's record is written.
    process = subprocess.Popen(
        [sys.executable, "-m", "hfrelease", "eval", str(demo_family), "--artifact", "w8a8-int8", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=marked_env(tmp_path),
    )
    results = demo_family / "results"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not list(results.rglob("*.json")):
        assert process.poll() is None, process.communicate()[1][-3000:]
        time.sleep(0.1)
    victims = vllm_servers(tmp_path)  # only this test's server, never another on the machine
    assert victims, "no vLLM server found to kill"
    os.killpg(os.getpgid(victims[0].pid), signal.SIGKILL)
    killed_at = time.monotonic()
    _, err = process.communicate(timeout=300)
    assert process.returncode == ExitCode.SERVER_FAILED, err[-3000:]
    assert time.monotonic() - killed_at < 60
    assert "vLLM exited" in err and "while in use" in err
    kept = Ledger(results).records(kind="gate")
    assert 1 <= len(kept) < 4
    assert nothing_left(tmp_path)

    again = hfrelease("eval", str(demo_family), "--artifact", "w8a8-int8", "--json", cwd=tmp_path)
    assert again.returncode in (ExitCode.OK, ExitCode.GATE_FAILED), again.stderr[-3000:]
    report = json.loads(again.stdout)
    measured = [r for r in report["rows"] if r["origin"] == "measured"]
    assert len(measured) == 4 - len(kept)
    assert len(Ledger(results).records(kind="gate")) == 4
