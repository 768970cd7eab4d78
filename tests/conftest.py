"""Shared fixtures: the repository's paths, the offline environment every test runs in, and the seal of `unit` tests.

Tests live in the folder of the package they test (tests/<package>/, checked by tests/test_tests_layout.py);
what kind of test one is, is a marker: `slow` (starts real servers, trains or quantizes) or `unit` (fast and
sealed: no network, no processes unless `allow_subprocess`).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Fixtures shared across folders: the demo family's session fixtures (one build, one vendor Hub per session,
# whichever folders use them), and gate families with fake OpenAI servers.
pytest_plugins = ["tests.demo_session", "tests.gate_fixtures"]

# Nothing may be fetched from the Hugging Face Hub at test time.
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ[_name] = "1"


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def fixture_family(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/family (a complete manifest over tiny local files)."""
    import shutil

    target = tmp_path / "family"
    shutil.copytree(FIXTURES / "family", target)
    return target


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to an address off this machine fails the test (sockets on files still work)."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in {"127.0.0.1", "localhost", "::1"} and not host.startswith("/"):
            raise AssertionError(f"a test tried to reach {host!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture(scope="session")
def vllm_parser_loaded() -> None:
    """vLLM's argument parser (the serve guard's), loaded once before any test is sealed: importing vLLM
    runs `file` and `uname` through py-cpuinfo, which the seal would refuse."""
    from hfrelease.serving.guard import vllm_parser

    vllm_parser()


@pytest.fixture(autouse=True)
def _sealed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `unit` test cannot reach the network or start a process by accident (`allow_subprocess` lifts the
    second)."""
    if request.node.get_closest_marker("unit") is None:
        return
    request.getfixturevalue("vllm_parser_loaded")
    request.getfixturevalue("loopback_only")
    if request.node.get_closest_marker("allow_subprocess") is None:

        def no_process(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"unit test tried to start a process: {args[:1]!r}")

        monkeypatch.setattr(subprocess.Popen, "__init__", no_process)


@pytest.fixture
def isolated_hub_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, loopback_only: None) -> None:
    """huggingface_hub talking only to a local Hub: no Xet, offline mode lifted for loopback, and no token
    or cache of the person running the tests."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


@pytest.fixture
def public_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub's default endpoint (huggingface.co) with offline mode on, as on a machine with no Hub.

    The session's vendor Hub (tests/demo_session.py) sets HF_ENDPOINT to a loopback server for the
    tests that come after it; a test about the Hub being out of reach must not depend on running first.
    """
    from huggingface_hub import constants

    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", "https://huggingface.co/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


CliRun = Callable[[list[str]], tuple[int, str, str]]


def cpu_route_env(artifact: Any) -> dict[str, str]:
    """The variable of the CPU route this host's vLLM serves `artifact` by, if any: FP8's torch matmul on a Xeon
    with AMX-INT8 (`fp8_route`), NVFP4's emulation on any CPU build; read from the routes' own conditions."""
    from hfrelease.ledger.provenance import cpu_flags
    from hfrelease.serving.emulation import EMULATION_VARIABLE, cpu_build, needs_emulation
    from hfrelease.serving.fp8_route import FP8_VARIABLE, needs_torch_fp8

    env: dict[str, str] = {}
    if needs_torch_fp8(artifact, cpu=cpu_build(), flags=cpu_flags()):
        env[FP8_VARIABLE] = "1"
    if needs_emulation(artifact, cpu=cpu_build()):
        env[EMULATION_VARIABLE] = "1"
    return env


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Run `hfrelease ARGS` in this process: (exit code, stdout, stderr)."""
    from hfrelease.cli import main

    def run(args: list[str]) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        captured = capsys.readouterr()
        code = exit_info.value.code
        return (code if isinstance(code, int) else 1), captured.out, captured.err

    return run


@pytest.fixture
def lm_eval_logging() -> Iterator[None]:
    """The gate runner routes lm-eval's (and asyncio's) loggers to its run directory: put them back afterwards."""
    import logging

    names = ("lm_eval", "lm-eval", "lm_eval.evaluator", "httpx", "asyncio")
    saved = {name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate) for name in names}
    yield
    for name, (handlers, propagate) in saved.items():
        logger = logging.getLogger(name)
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.handlers, logger.propagate = handlers, propagate
