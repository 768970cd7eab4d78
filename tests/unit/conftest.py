"""Unit tests are fast and sealed: they cannot reach the network or spawn processes by accident."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from hfrelease.manifest import Manifest


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


@pytest.fixture
def family(fixture_family: Path) -> Manifest:
    """The fixture family, loaded, with small random safetensors weights in each checkpoint (each its own hash)."""
    import numpy as np
    from safetensors.numpy import save_file

    from hfrelease.manifest import load_manifest

    for name, seed in (("ref", 0), ("fp8", 1), ("draft", 2)):
        weights = np.random.default_rng(seed).standard_normal((4, 4)).astype("float32")
        save_file({"w": weights}, str(fixture_family / "checkpoints" / name / "model.safetensors"))
    return load_manifest(fixture_family)
