"""Unit tests are fast and sealed: they cannot reach the network or spawn processes by accident."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _sealed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("allow_subprocess") is None:

        def no_process(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"unit test tried to start a process: {args[:1]!r}")

        monkeypatch.setattr(subprocess.Popen, "__init__", no_process)

    real_connect = socket.socket.connect

    def local_only(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in {"127.0.0.1", "localhost", "::1"} and not host.startswith("/"):
            raise AssertionError(f"unit test tried to reach {host!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)
