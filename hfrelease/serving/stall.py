"""The stall watchdog: a server that stops answering ends the wait on it within a bounded time.

A server can stop answering without dying (an engine wedged in a collective, a process stopped by the
kernel, a remote endpoint whose network went away): nothing then ever fails, and lm-eval would wait its
full request timeout, and retry. While requests are outstanding, the watchdog looks for progress of any
kind: an answered request, or vLLM's own token counters moving on `/metrics` (prompt and generated
tokens, which move within a second while anything is being computed). No progress for `window` seconds
is a stall. A server without those counters (not vLLM, or `/metrics` unreachable) shows progress only by
answering, and a single answer may legitimately take a whole request timeout, so its window is
`fallback_window` (the per-request timeout).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable
from types import TracebackType

from hfrelease.errors import ServerError
from hfrelease.serving.alarm import Alarm
from hfrelease.serving.watch import BackgroundWatch

# Counters whose movement shows that the engine computes (summed over engines and models).
PROGRESS_COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total")
POLL_SECONDS = 0.5
PROBE_EVERY_SECONDS = 2.0
PROBE_TIMEOUT_SECONDS = 5.0


def progress_counter(base_url: str, *, timeout: float = PROBE_TIMEOUT_SECONDS) -> float | None:
    """The sum of vLLM's token/request counters at `base_url`, or None when it exposes none of them."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/metrics", timeout=timeout) as response:  # noqa: S310
            text = response.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    total, seen = 0.0, False
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in PROGRESS_COUNTERS:
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
            seen = True
    return total if seen else None


class Progress:
    """Requests answered and sent so far by the harness (thread-safe: lm-eval reports from its loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.done = 0
        self.total = 0

    def update(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = done, total

    def read(self) -> tuple[int, int]:
        with self._lock:
            return self.done, self.total


class StallWatch(BackgroundWatch):
    """Rings `alarm` with a ServerError when requests are outstanding and nothing moves for too long.

    A context manager: the watching thread runs for the duration of the block.
    """

    def __init__(
        self,
        *,
        base_url: str,
        progress: Progress,
        alarm: Alarm,
        window: float,
        fallback_window: float,
        probe: Callable[[str], float | None] = progress_counter,
        clock: Callable[[], float] = time.monotonic,
        poll: float = POLL_SECONDS,
        probe_every: float = PROBE_EVERY_SECONDS,
    ) -> None:
        self.base_url = base_url
        self.progress = progress
        self.alarm = alarm
        self.window = window
        self.fallback_window = fallback_window
        self._probe = probe
        self._clock = clock
        self._poll = poll
        self._probe_every = probe_every
        super().__init__(thread_name="stall-watchdog", join_timeout=PROBE_TIMEOUT_SECONDS + 1)
        self.stalled: ServerError | None = None

    def __enter__(self) -> StallWatch:
        self._start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._halt()

    def _watch(self) -> None:
        last_move = self._clock()
        last_done = -1
        last_counter: float | None = None
        counters_seen = False
        next_probe = 0.0
        while not self._stop.wait(self._poll):
            now = self._clock()
            done, total = self.progress.read()
            if done >= total or done != last_done:
                # Nothing awaited (between tasks, building requests) or an answer came: not a stall.
                last_move, last_done = now, done
                continue
            if now >= next_probe:
                next_probe = now + self._probe_every
                counter = self._probe(self.base_url)
                if counter is not None:
                    counters_seen = True
                    if counter != last_counter:
                        last_move, last_counter = (now if last_counter is not None else last_move), counter
                now = self._clock()  # the probe itself may have waited
            # Counters are read every probe_every seconds: a window shorter than two reads cannot see them move.
            limit = max(self.window, 2 * self._probe_every) if counters_seen else self.fallback_window
            if now - last_move > limit:
                evidence = ("its token counters on /metrics did not move" if counters_seen
                            else "it answered no request")
                self.stalled = ServerError(
                    f"the server at {self.base_url} stopped answering: {total - done} of {total} requests "
                    f"outstanding and {evidence} for {limit:g} s",
                    hint="The answered requests are kept: `hfrelease eval` again resumes from them. If the "
                    "server is only slow, raise the gate's request_timeout.",
                )
                self.alarm.ring(self.stalled)
                return
