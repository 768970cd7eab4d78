"""A custom gate whose process stops asking the server is stopped, with everything it started.

The runs use real processes; the server is either a probe function (its counters) or tests/fake_openai.py,
a small server serving vLLM's counters on `/metrics`: a custom gate that hangs is what is under test, and a
real vLLM server would only add a minute of start-up.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import psutil
import pytest

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.custom_gate import run_custom_gate
from hfrelease.evaluation.idle_watch import idle_watched_runner
from hfrelease.manifest.model import Gate
from tests.fake_openai import FakeOpenAI

FAST = {"poll": 0.05, "probe_every": 0.1}


def _sleeper(seconds: float, child_pid_file: Path | None = None) -> list[str]:
    """A command that sleeps; with `child_pid_file`, it first starts a sleeping child and writes its pid."""
    code = "import time\n"
    if child_pid_file is not None:
        code += ("import subprocess, sys\n"
                 "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
                 f"open({str(child_pid_file)!r}, 'w').write(str(child.pid))\n")
    code += f"time.sleep({seconds})\n"
    return [sys.executable, "-c", code]


def test_a_process_the_server_sees_nothing_from_is_stopped_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    run = idle_watched_runner("http://unused", limit=1.0, what="custom gate 'hang'", probe=lambda url: 7.0, **FAST)
    started = time.monotonic()
    with pytest.raises(MeasurementError, match=r"custom gate 'hang' asked the server nothing for 1 s") as raised:
        run(_sleeper(120, pid_file))
    assert time.monotonic() - started < 30
    assert "request_timeout" in (raised.value.hint or "")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the gate's child outlived the stopped gate"
        time.sleep(0.05)


def test_a_process_whose_server_computes_runs_to_its_end() -> None:
    counter = itertools.count()
    run = idle_watched_runner("http://unused", limit=0.5, what="gate", probe=lambda url: float(next(counter)), **FAST)
    result = run([sys.executable, "-c", "import time; time.sleep(2); print('done')"])
    assert result.returncode == 0 and result.stdout.strip() == "done"


def test_a_server_without_counters_leaves_the_process_unwatched() -> None:
    run = idle_watched_runner("http://unused", limit=0.2, what="gate", probe=lambda url: None, **FAST)
    assert run(_sleeper(1.5)).returncode == 0


def test_a_custom_gate_that_hangs_is_void_not_a_hang(tmp_path: Path) -> None:
    """Through `run_custom_gate`, against a server that serves vLLM's counters: the gate's request timeout is
    the idle limit, and the failure is a MeasurementError (a void gate, exit 5), not a wait without end."""
    server = FakeOpenAI(model="m", metrics=True).start()
    try:
        gate = Gate(id="hang", command=_sleeper(300), mode="non-thinking", max_tokens=8, metric="rate",
                    margin=0.1, request_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(MeasurementError, match="asked the server nothing"):
            run_custom_gate(gate, base_url=server.url, model="m", cwd=tmp_path)
        assert time.monotonic() - started < 60
    finally:
        server.stop()
