"""The watchdog of a custom gate's process: a gate that stops asking the server is stopped.

The stall watchdog (`hfrelease.serving.stall`) looks for progress while a harness has requests outstanding;
a custom gate's requests are its own, so hfrelease cannot count them, and a gate that sleeps, waits on
something that never comes, or loops without asking would hang `eval` forever. What hfrelease can see is the
server: vLLM's token and request counters on `/metrics` move whenever anything is asked of it. A gate whose
process lives while those counters stand still for `limit` seconds (the gate's request timeout: a request
may take that long, so nothing legitimate is cut) is stopped with its whole process group, a void
measurement: `eval` goes on to the next gate and keeps what was measured. A server without those counters
cannot show idleness; the gate then runs unwatched, as lm-eval's own requests are bounded by their timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from hfrelease.errors import MeasurementError
from hfrelease.serving.stall import PROBE_EVERY_SECONDS, progress_counter

POLL_SECONDS = 0.5


def idle_watched_runner(
    base_url: str,
    *,
    limit: float,
    what: str,
    probe: Callable[[str], float | None] = progress_counter,
    clock: Callable[[], float] = time.monotonic,
    poll: float = POLL_SECONDS,
    probe_every: float = PROBE_EVERY_SECONDS,
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """A `subprocess.run`-shaped runner (for `hfrelease.shell.run`) that stops the process when the server at
    `base_url` has computed nothing for `limit` seconds while it ran."""

    def run(argv: Sequence[str], *, env: Any = None, cwd: Any = None, timeout: float | None = None,
            stdin: Any = subprocess.DEVNULL, **_: Any) -> subprocess.CompletedProcess[str]:
        # Its own session, so that stopping it stops whatever it started (a gate may be a shell script).
        with subprocess.Popen(list(argv), env=env, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) as process:
            started = last_move = clock()
            last_counter = probe(base_url)
            watched = last_counter is not None
            next_probe = started + probe_every
            while True:
                try:
                    out, err = process.communicate(timeout=poll)
                    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)
                except subprocess.TimeoutExpired:
                    pass
                now = clock()
                if timeout is not None and now - started > timeout:
                    _stop(process)
                    raise subprocess.TimeoutExpired(list(argv), timeout)
                if not watched:
                    continue
                if now >= next_probe:
                    next_probe = now + probe_every
                    counter = probe(base_url)
                    if counter is not None and counter != last_counter:
                        last_counter, last_move = counter, clock()
                if clock() - last_move > limit:
                    _stop(process)
                    raise MeasurementError(
                        f"{what} asked the server nothing for {limit:g} s (its token and request counters on "
                        "/metrics did not move) and was stopped",
                        hint="A gate that computes longer than that between requests needs a larger "
                        "`request_timeout` on the gate; one that waits on something else never finishes.",
                    )

    return run


def _stop(process: subprocess.Popen[str]) -> None:
    """Kill the process's group (it leads its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
