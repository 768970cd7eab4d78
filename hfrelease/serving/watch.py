"""A daemon thread that watches a server for the duration of a `with` block.

The stall watchdog (serving/stall.py) and the load watch (evaluation/utilization.py) both poll the server's
`/metrics` from a thread that starts on entering the block and stops on leaving it; the thread's life is kept
here once, the polling itself stays with each watcher.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class BackgroundWatch(ABC):
    """Runs `_watch` in a daemon thread between `_start()` and `_halt()`; `_watch` loops on `self._stop.wait`."""

    def __init__(self, *, thread_name: str, join_timeout: float) -> None:
        self._thread_name = thread_name
        self._join_timeout = join_timeout  # one probe's timeout and a second: the thread ends within it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name=self._thread_name, daemon=True)
        self._thread.start()

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._join_timeout)

    @abstractmethod
    def _watch(self) -> None:
        """The watcher's loop (each subclass polls what it watches), until `self._stop` is set."""
