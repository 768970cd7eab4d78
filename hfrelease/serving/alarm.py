"""Waking the main thread when a watchdog sees that what it waits on will never come.

lm-eval's request loop and `vllm bench serve` run in the main thread inside `asyncio.run`; a watchdog
thread that sees the server die or stall can end that wait only by interrupting the main thread
(`_thread.interrupt_main`, a simulated Ctrl-C that asyncio turns into cancelling its task). One `Alarm`
per wait makes sure that happens at most once, and keeps the reason, so the KeyboardInterrupt that lands
in the main thread is reported as what it was (a dead or stalled server), not as Ctrl-C.
"""

from __future__ import annotations

import _thread
import signal
import threading
from typing import Any

from hfrelease.errors import HfreleaseError


class Alarm:
    """Interrupts the main thread once, for the first reason given while armed; the reason is kept."""

    def __init__(self) -> None:
        # Held while a watchdog decides to interrupt, so that once disarm() returns no new interrupt comes.
        self._lock = threading.Lock()
        self._armed = False
        self.reason: HfreleaseError | None = None
        self._previous: Any = None  # the SIGINT handler replaced while armed (None: nothing replaced)

    def arm(self) -> None:
        """Interrupt the main thread for the next reason given (a new wait: the last one's reason is dropped)."""
        with self._lock:
            self._armed = True
            self.reason = None
        # interrupt_main() calls whatever Python handler SIGINT has, and does nothing under SIG_IGN/SIG_DFL:
        # a handler some library left behind would swallow the interrupt and the wait would never end (seen
        # in one pytest session). While armed, SIGINT is Python's own (KeyboardInterrupt, which asyncio.run
        # turns into cancelling its task), as in a fresh `hfrelease` process.
        if threading.current_thread() is threading.main_thread() and self._previous is None:
            current = signal.getsignal(signal.SIGINT)
            if current is not signal.default_int_handler:
                self._previous = current
                signal.signal(signal.SIGINT, signal.default_int_handler)

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

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
