"""Stops a vLLM server's process group when the hfrelease that started it is gone, however it went.

Run as its own small process for each server (`python -I -S reaper.py PGID TOKEN`, standard library
only, so it starts in milliseconds and imports nothing of the environment), in its own session, with
the read end of a pipe as stdin whose write end only hfrelease holds. When hfrelease exits, even by
SIGKILL, the kernel closes that end: the read returns end-of-file and the reaper stops the group
(SIGTERM, then SIGKILL). A parent-death signal alone would not do: it reaches only the API server, not
the engine processes vLLM forks, which would keep running (and may keep its port).

The group is recognised by TOKEN, a value in the environment of the processes hfrelease started: a
process-group id can be reused once the group is gone, and a stranger's group must never be signalled.
The functions here are also what hfrelease's sweep of stale servers uses (`hfrelease.serving.orphans`).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from pathlib import Path

TOKEN_VARIABLE = "HFRELEASE_SERVER_TOKEN"  # noqa: S105 - the name of a variable, not a secret
TERM_GRACE_SECONDS = 5.0


def group_members(pgid: int, token: str) -> list[int]:
    """Live processes of group `pgid` whose environment carries TOKEN=`token` (zombies left out)."""
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    try:
        entries = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            # after "pid (comm)": state, ppid, pgrp, ...
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z" or int(fields[2]) != pgid:
                continue
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def stop_group(pgid: int, token: str, *, grace: float = TERM_GRACE_SECONDS) -> bool:
    """SIGTERM the group if it is still ours, SIGKILL what is left after `grace`; whether there was any."""
    if not group_members(pgid, token):
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not group_members(pgid, token):
                return True
            time.sleep(0.1)
    return True


def main(argv: list[str]) -> int:
    pgid, token = int(argv[1]), argv[2]
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        if ready and not os.read(0, 4096):
            # End of file: hfrelease is gone (or stopped the server and let go of the pipe).
            stop_group(pgid, token)
            return 0
        if not group_members(pgid, token):
            return 0  # the server is gone: nothing left to guard


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for hfrelease is not the reaper's business
    sys.exit(main(sys.argv))
