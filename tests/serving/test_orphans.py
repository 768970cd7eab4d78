"""A server's process group never outlives the hfrelease that started it: the reaper stops it when its
starter is SIGKILLed, and the sweep stops a recorded group whose starter is gone (and nothing else).

Real processes (`sleep`-like Python children standing in for vLLM's API server and an engine process it
forks); the real vLLM case is tests/serving/test_eval_failures.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hfrelease.serving.orphans import TOKEN_VARIABLE, new_token, sweep_stale
from hfrelease.serving.reaper import group_members

pytestmark = [pytest.mark.unit, pytest.mark.allow_subprocess]
ROOT = Path(__file__).resolve().parents[2]

# A stand-in server: forks one "engine" that stays in its process group, then both wait.
SERVER = "import os, time\nif os.fork() == 0:\n    time.sleep(600)\nelse:\n    time.sleep(600)\n"

# A stand-in hfrelease: starts the server as VllmServer.start does (own session, token, parent-death
# signal, a Guard), prints the group id, then waits to be killed.
STARTER = f"""
import subprocess, sys, time, os
from pathlib import Path
from hfrelease.serving.orphans import Guard, die_with_parent
token, registry = sys.argv[1], Path(sys.argv[2])
env = {{**os.environ, "{TOKEN_VARIABLE}": token}}
server = subprocess.Popen([sys.executable, "-c", {SERVER!r}], env=env, start_new_session=True,
                          preexec_fn=die_with_parent())
guard = Guard(pgid=server.pid, token=token, registry=registry, details={{}})
print(server.pid, flush=True)
time.sleep(600)
"""


def wait_gone(pgid: int, token: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_members(pgid, token):
            return True
        time.sleep(0.2)
    return False


def test_server_group_dies_with_a_sigkilled_starter(tmp_path: Path) -> None:
    """SIGKILL of the process that started a server: the server and the engine it forked are gone."""
    token = new_token()
    starter = subprocess.Popen([sys.executable, "-c", STARTER, token, str(tmp_path / "servers")],
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert starter.stdout is not None
    pgid = int(starter.stdout.readline())
    deadline = time.monotonic() + 10
    while len(group_members(pgid, token)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(group_members(pgid, token)) == 2  # the server and its engine
    assert list((tmp_path / "servers").glob("*.json"))  # recorded while it runs
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    assert wait_gone(pgid, token)


def test_sweep_stops_only_recorded_groups_whose_starter_is_gone(tmp_path: Path) -> None:
    """The sweep stops a recorded group whose starter died; a group whose starter lives, or a group
    without the recorded token, is left alone."""
    registry = tmp_path / "servers"
    registry.mkdir()
    groups = {}
    for name, token, owner in (("orphan", new_token(), 999_999_999), ("owned", new_token(), os.getpid())):
        process = subprocess.Popen([sys.executable, "-c", SERVER], env={**os.environ, TOKEN_VARIABLE: token},
                                   start_new_session=True)
        groups[name] = (process, token)
        stat = Path(f"/proc/{owner}/stat").read_text() if owner == os.getpid() else ") " + "0 " * 20
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        (registry / f"{process.pid}-{token}.json").write_text(
            json.dumps({"pgid": process.pid, "token": token, "owner": owner, "owner_start": ticks}))
    stranger = subprocess.Popen([sys.executable, "-c", SERVER], start_new_session=True)
    (registry / f"{stranger.pid}-x.json").write_text(json.dumps({"pgid": stranger.pid, "token": "x", "owner": 1,
                                                                "owner_start": -1}))
    try:
        time.sleep(0.5)
        stopped = sweep_stale(registry)
        orphan, orphan_token = groups["orphan"]
        assert [s["pgid"] for s in stopped] == [orphan.pid]
        assert wait_gone(orphan.pid, orphan_token)
        owned, owned_token = groups["owned"]
        assert group_members(owned.pid, owned_token)
        assert stranger.poll() is None
        assert sorted(p.name for p in registry.glob("*.json")) == [f"{owned.pid}-{owned_token}.json"]
    finally:
        for process in (stranger, *(p for p, _ in groups.values())):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
