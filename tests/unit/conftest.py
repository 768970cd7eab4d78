"""Unit tests are fast and sealed: they cannot reach the network or spawn processes by accident."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def _vllm_parser_loaded() -> None:
    """vLLM's argument parser (the serve guard's), loaded once before any test is sealed: importing vLLM
    runs `file` and `uname` through py-cpuinfo, which the seal below would refuse."""
    from hfrelease.serving.guard import vllm_parser

    vllm_parser()


@pytest.fixture(autouse=True)
def _sealed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, loopback_only: None) -> None:
    if request.node.get_closest_marker("allow_subprocess") is None:

        def no_process(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"unit test tried to start a process: {args[:1]!r}")

        monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
