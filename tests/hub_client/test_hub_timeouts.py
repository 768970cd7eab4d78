"""A Hub that accepts connections and never answers: every Hub request is bounded, reads are retried, a
commit is never sent twice, and `publish` ends with exit 7 instead of hanging."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.hub_client import ATTEMPTS, TIMEOUT_VARIABLE, bounded_client_factory
from hfrelease.hub_errors import hub_failure
from tests.conftest import CliRun
from tests.publish_family import TOKEN, make_family

pytestmark = pytest.mark.usefixtures("publish_isolation")


class SilentHub:
    """A TCP server that accepts every connection, reads what is sent and never answers a byte."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.accepted = 0
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            self.held.append(connection)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for connection in self.held:
            connection.close()
        self.listener.close()


@pytest.fixture
def silent_hub() -> Iterator[SilentHub]:
    """A Hub that never answers, for the test's duration."""
    hub = SilentHub()
    yield hub
    hub.close()


def test_reads_are_bounded_and_retried_and_writes_sent_once(silent_hub: SilentHub) -> None:
    """A GET without a timeout of its own is bounded and tried ATTEMPTS times; a POST is sent once."""
    import httpx2

    pauses: list[float] = []
    client = bounded_client_factory(read=0.5, connect=2, sleep=pauses.append)()
    with pytest.raises(httpx2.ReadTimeout) as read:
        client.get(f"{silent_hub.url}/api/models/a/b", timeout=None)  # as HfApi.repo_info passes it
    assert silent_hub.accepted == ATTEMPTS and len(pauses) == ATTEMPTS - 1
    error = hub_failure(read.value)
    assert error is not None and error.exit_code == ExitCode.PUBLISH_FAILED
    assert silent_hub.url in error.message
    with pytest.raises(httpx2.ReadTimeout):
        client.post(f"{silent_hub.url}/api/models/a/b/commit/main", json={}, timeout=None)
    assert silent_hub.accepted == ATTEMPTS + 1
    client.close()


def test_publish_to_a_silent_hub_ends_with_exit_7(
    tmp_path: Path, cli: CliRun, silent_hub: SilentHub, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`publish` against a Hub that never answers: exit 7 naming the request, within a bounded time."""
    family = make_family(tmp_path / "family", quants=1)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "1")
    started = time.monotonic()
    code, _, err = cli(["publish", str(family), "--hub", silent_hub.url])
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "no answer from" in err and silent_hub.url in err
    assert time.monotonic() - started < 120  # does not hang (each request gives up after ~1 s x 3)
    assert silent_hub.accepted >= 1
