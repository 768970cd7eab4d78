"""A client's connection error while the managed server is dead or dying is engine death (exit 5), not a bug."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from hfrelease.errors import ExitCode
from hfrelease.evaluation import server_job
from hfrelease.evaluation.events import NullEvents
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.process import ServerDiedError, VllmServer, is_connection_error

pytestmark = pytest.mark.unit


class FakeProcess:
    """A `vllm serve` stand-in that is alive until `die()`, like a process group killed by SIGKILL."""

    pid = 4242

    def __init__(self) -> None:
        self.returncode: int | None = None

    def die(self, code: int = -9) -> None:
        self.returncode = code

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode


def make_server(tmp_path: Path) -> tuple[VllmServer, FakeProcess]:
    process = FakeProcess()
    command = ServeCommand(argv=("vllm", "serve", "m"), served_model_name="o/m")
    server = VllmServer(command, log_path=tmp_path / "server.log", port=1, base_env={},
                        popen=lambda *a, **k: process)
    server.start()
    return server, process


def refused() -> Exception:
    """The error lm-eval's aiohttp client raised when the killed server's port closed."""
    key = SimpleNamespace(host="127.0.0.1", port=1, is_ssl=False, ssl=None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]


def test_connection_errors_are_recognised_through_their_causes() -> None:
    """Refused/reset/disconnected errors count, directly or as the cause of another; a plain bug does not."""
    assert is_connection_error(refused())
    assert is_connection_error(aiohttp.ServerDisconnectedError())
    assert is_connection_error(ConnectionResetError())
    try:
        try:
            raise ConnectionRefusedError()
        except ConnectionRefusedError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_connection_error(outer)
    assert not is_connection_error(KeyError("x"))


def test_refused_connection_waits_for_a_dying_server(tmp_path: Path) -> None:
    """A server that is seen dead a moment after the refused connection is reported as dead, while in use."""
    server, process = make_server(tmp_path)
    threading.Timer(0.5, process.die).start()  # reaping lags behind the client's error under load
    died = server.death_behind(refused(), grace=10)
    assert isinstance(died, ServerDiedError)
    assert died.exit_code == ExitCode.SERVER_FAILED
    assert "while in use" in died.message


def test_refused_connection_from_a_live_server_is_not_death(tmp_path: Path) -> None:
    """A live server keeps the error what it is (after the bounded wait)."""
    server, _ = make_server(tmp_path)
    started = time.monotonic()
    assert server.death_behind(refused(), grace=0.3) is None
    assert time.monotonic() - started < 5


def test_other_errors_do_not_wait(tmp_path: Path) -> None:
    """A non-connection error is blamed on the server only when it is already dead; no wait either way."""
    server, process = make_server(tmp_path)
    started = time.monotonic()
    assert server.death_behind(KeyError("x"), grace=30) is None
    assert time.monotonic() - started < 5
    process.die()
    assert isinstance(server.death_behind(KeyError("x"), grace=30), ServerDiedError)


def test_gate_run_reports_engine_death_when_the_client_error_wins_the_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner turns the client's ClientConnectorError from a killed server into ServerDiedError (exit 5)."""
    server, process = make_server(tmp_path)

    def measure(*args: Any, **kwargs: Any) -> Any:
        process.die()  # the group is SIGKILLed; the watchdog thread has not noticed yet
        raise refused()

    monkeypatch.setattr(server_job, "_measure", measure)
    gate = SimpleNamespace(id="g", request_timeout=60.0, is_fidelity=False)
    job = SimpleNamespace(pending=[SimpleNamespace(gate=gate, label="g")], artifact=SimpleNamespace(id="a", repo="o/m"),
                          model_dir=tmp_path)
    with pytest.raises(ServerDiedError) as caught:
        server_job.run_gates(SimpleNamespace(), job, "http://127.0.0.1:1", server, None,  # type: ignore[arg-type]
                          ledger=None, events=NullEvents(), measured={}, log_dir=tmp_path)  # type: ignore[arg-type]
    assert caught.value.exit_code == ExitCode.SERVER_FAILED


def _run_one_gate(tmp_path: Path, server: VllmServer) -> None:
    gate = SimpleNamespace(id="g", request_timeout=60.0, is_fidelity=False)
    job = SimpleNamespace(pending=[SimpleNamespace(gate=gate, label="g")], artifact=SimpleNamespace(id="a", repo="o/m"),
                          model_dir=tmp_path)
    server_job.run_gates(SimpleNamespace(), job, "http://127.0.0.1:1", server, None,  # type: ignore[arg-type]
                      ledger=None, events=NullEvents(), measured={}, log_dir=tmp_path)  # type: ignore[arg-type]


def test_watchdog_interrupt_is_the_death(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watchdog's interrupt of the main thread surfaces as the death it recorded (exit 5)."""
    server, process = make_server(tmp_path)

    def measure(*args: Any, **kwargs: Any) -> Any:
        process.die()
        server.died = server.death_behind(KeyError("x"), grace=0)  # what the watchdog records first
        raise KeyboardInterrupt

    monkeypatch.setattr(server_job, "_measure", measure)
    with pytest.raises(ServerDiedError):
        _run_one_gate(tmp_path, server)


def test_client_error_from_a_live_server_stays_what_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection error while the server lives is not called its death."""
    server, _ = make_server(tmp_path)

    def measure(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionResetError("reset")

    monkeypatch.setattr(server_job, "_measure", measure)
    real = server.death_behind
    monkeypatch.setattr(server, "death_behind", lambda exc, grace=0.0: real(exc, grace=0.2))
    with pytest.raises(ConnectionResetError):
        _run_one_gate(tmp_path, server)


def test_the_server_gets_no_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started from hfrelease's environment holds no Hub token (it serves a local snapshot offline,
    and runs plugin and remote code); the rest of the environment and the manifest's serve.env still arrive."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "a" * 34)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_" + "b" * 34)
    monkeypatch.setenv("HFRELEASE_TEST_HARMLESS", "kept")
    command = ServeCommand(argv=("vllm", "serve", "m"), served_model_name="m", env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    env = VllmServer(command, log_path=tmp_path / "server.log", port=1).environment()
    assert "HF_TOKEN" not in env and "HUGGING_FACE_HUB_TOKEN" not in env
    assert not any("hf_aaaa" in value or "hf_bbbb" in value for value in env.values())
    assert env["HFRELEASE_TEST_HARMLESS"] == "kept" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
