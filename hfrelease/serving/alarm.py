"""Waking the main thread when a watchdog sees that what it waits on will never come.

lm-eval's request loop and `vllm bench serve` run in the main thread inside `asyncio.run`; a watchdog
thread that sees the server die or stall can end that wait only by interrupting the main thread
(`_thread.interrupt_main`, a simulated Ctrl-C that asyncio turns into cancelling its task). One `Alarm`
per wait makes sure that happens at most once, and keeps the reason, so the KeyboardInterrupt that lands
in the main thread is reported as what it was (a dead or stalled server), not as Ctrl-C.
"""

from __future__ import annotations

import _thread
import threading

from hfrelease.errors import HfreleaseError


class Alarm:
    """Interrupts the main thread once, for the first reason given while armed; the reason is kept."""

    def __init__(self) -> None:
        # Held while a watchdog decides to interrupt, so that once disarm() returns no new interrupt comes.
        self._lock = threading.Lock()
        self._armed = False
        self.reason: HfreleaseError | None = None

    def arm(self) -> None:
        """Interrupt the main thread for the next reason given (a new wait: the last one's reason is dropped)."""
        with self._lock:
            self._armed = True
            self.reason = None

    def disarm(self) -> None:
        with self._lock:
            self._armed = False

    @property
    def armed(self) -> bool:
        return self._armed

    def ring(self, reason: HfreleaseError) -> bool:
        """Interrupt the main thread for `reason`, if armed and not rung yet; whether it did."""
        with self._lock:
            if not self._armed or self.reason is not None:
                return False
            self.reason = reason
            self._armed = False
            _thread.interrupt_main()
            return True
