"""No orphaned servers: a vLLM server dies with the hfrelease that started it, even under SIGKILL.

Three layers, since each covers what the others cannot:

- a parent-death signal (`PR_SET_PDEATHSIG`, SIGKILL) on the API server process, set in the child before
  it runs vLLM: the kernel kills it the moment hfrelease's thread that started it is gone;
- a reaper process per server (`hfrelease.serving.reaper`) that stops the server's whole process group,
  engine processes included, when hfrelease is gone;
- a record of every running server in `servers/` under hfrelease's cache directory, and a sweep of the
  records whose hfrelease is gone at the start of the next server: what survived both (the reaper killed
  too, a machine suspended halfway) is stopped then.

A server's processes are recognised by a token in their environment, never by a name: other vLLM
servers on the machine are not hfrelease's to stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hfrelease.serving.reaper import TOKEN_VARIABLE, group_members, stop_group

_PR_SET_PDEATHSIG = 1
REAPER = Path(__file__).with_name("reaper.py")


def registry_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where running servers are recorded: `servers/` in $HFRELEASE_CACHE (default ~/.cache/hfrelease)."""
    environ = os.environ if env is None else env
    return Path(environ.get("HFRELEASE_CACHE") or Path.home() / ".cache" / "hfrelease") / "servers"


def new_token() -> str:
    return secrets.token_hex(8)


def _prctl() -> Callable[..., int] | None:
    # Looked up before the fork: after it, in the child, only async-signal-safe work is allowed, and
    # loading a library is not.
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel SIGKILL the child when the starting thread ends; None where it
    cannot be done (not Linux, or not the main thread: the signal follows the thread, not the process)."""
    prctl = _prctl()
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    return preexec


class Guard:
    """The reaper and the registry record of one running server; `release()` when it is stopped."""

    def __init__(self, *, pgid: int, token: str, registry: Path, details: Mapping[str, Any]) -> None:
        self.pgid = pgid
        self.token = token
        self.record = registry / f"{pgid}-{token}.json"
        self._reaper: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None
        with contextlib.suppress(OSError):
            registry.mkdir(parents=True, exist_ok=True)
            payload = {"pgid": pgid, "token": token, "owner": os.getpid(), "owner_start": _start_ticks(os.getpid()),
                       **details}
            tmp = self.record.with_suffix(".tmp")
            tmp.write_text(json.dumps(payload, indent=1))
            tmp.replace(self.record)
        read_end, write_end = os.pipe()  # both non-inheritable: only the reaper gets the read end, as stdin
        try:
            self._reaper = subprocess.Popen(
                [sys.executable, "-I", "-S", str(REAPER), str(pgid), token],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError:
            os.close(write_end)
        else:
            self._pipe = write_end
        finally:
            os.close(read_end)

    def release(self) -> None:
        """The server is stopped: let the reaper go and forget the record."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._reaper is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._reaper.wait(timeout=15)
            self._reaper = None
        with contextlib.suppress(OSError):
            self.record.unlink()


def _start_ticks(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot): with the pid, it names one process for good."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owner_alive(data: Mapping[str, Any]) -> bool:
    pid = data.get("owner")
    if not isinstance(pid, int):
        return False
    ticks = _start_ticks(pid)
    return ticks is not None and ticks == data.get("owner_start")


def sweep_stale(registry: Path) -> list[dict[str, Any]]:
    """Stop every recorded server whose hfrelease is gone and drop its record; the records of those stopped."""
    stopped = []
    for path in sorted(registry.glob("*.json")) if registry.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            pgid, token = int(data["pgid"]), str(data["token"])
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if _owner_alive(data):
            continue
        if group_members(pgid, token) and stop_group(pgid, token):
            stopped.append(data)
        with contextlib.suppress(OSError):
            path.unlink()
    return stopped


__all__ = ["TOKEN_VARIABLE", "Guard", "die_with_parent", "new_token", "registry_dir", "sweep_stale"]
