"""Counters tests read to prove what crossed the wire: requests per endpoint, file bytes received.

In memory, per server process (a restart starts from zero); read with `HubServer.stats()` or
`GET /api/_hfrelease/stats`. "File bytes" are the bytes of file content the server received: LFS upload
bodies plus the decoded content of files sent inline in a commit. Re-publishing identical content should
leave both at zero.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class HubStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[str] = Counter()
        self._lfs_bytes = 0
        self._regular_bytes = 0

    def count_request(self, endpoint: str) -> None:
        with self._lock:
            self._requests[endpoint] += 1

    def add_lfs_bytes(self, count: int) -> None:
        with self._lock:
            self._lfs_bytes += count

    def add_regular_bytes(self, count: int) -> None:
        with self._lock:
            self._regular_bytes += count

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._lfs_bytes = self._regular_bytes = 0

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(sorted(self._requests.items())),
                "requests_total": sum(self._requests.values()),
                "file_bytes_received": self._lfs_bytes + self._regular_bytes,
                "lfs_bytes_received": self._lfs_bytes,
                "regular_file_bytes_received": self._regular_bytes,
            }
