"""Fixtures of the real integration tests: the demo family built once, family copies with empty ledgers.

The demo family is built by the real builder (training on the CPU, llm-compressor in its own venv) into
build/demo/, the directory `model_cards/demo/release.toml` points at, and reused across runs when the
builder's stamp says it is complete. Each test that records results works on a copy of the family
directory so that the repository's own ledger is never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from hfrelease.demo.build import build_demo_family
from hfrelease.demo.paths import default_quant_python

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "demo"


@pytest.fixture(scope="session", autouse=True)
def _vllm_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """vLLM on the CPU, offline, with its caches in the session's temp dir."""
    previous = dict(os.environ)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(tmp_path_factory.mktemp("vllm-cache")))
    os.environ["HFRELEASE_CACHE"] = str(tmp_path_factory.mktemp("hfrelease-cache"))
    yield
    os.environ.clear()
    os.environ.update(previous)


@pytest.fixture(scope="session")
def demo_build() -> dict[str, Path]:
    """The demo family's artifact directories (built on first use, minutes; reused afterwards)."""
    return build_demo_family(BUILD, quant_python=default_quant_python(os.environ))


@pytest.fixture
def demo_family(tmp_path: Path, demo_build: dict[str, Path]) -> Path:
    """A copy of model_cards/demo with an empty ledger, whose relative paths still reach build/demo."""
    target = tmp_path / "model_cards" / "demo"
    shutil.copytree(
        ROOT / "model_cards" / "demo", target, ignore=shutil.ignore_patterns("results", "build", "*.egg-info")
    )
    (tmp_path / "build").symlink_to(ROOT / "build")
    (target / "results").mkdir()
    return target


# The environment variable that marks the processes one test started: hfrelease passes its environment to
# the vLLM servers it starts and they to their engine processes, so the mark finds exactly those, however
# many other vLLM servers run on the machine (CI hosts and developer machines often serve something).
TEST_MARK = "HFRELEASE_TEST_MARK"


def marked_env(mark: Path | str) -> dict[str, str]:
    """This process's environment plus the mark of one test (its tmp_path)."""
    return {**os.environ, TEST_MARK: str(mark)}


def marked_processes(mark: Path | str) -> list[psutil.Process]:
    """Live processes whose environment carries `mark` (what one test started, children included)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            mine = process.pid != os.getpid() and process.environ().get(TEST_MARK) == str(mark)
            if mine and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def vllm_servers(mark: Path | str) -> list[psutil.Process]:
    """The `vllm serve` API servers among the processes marked `mark` (process-group leaders)."""
    found = []
    for process in marked_processes(mark):
        with contextlib.suppress(psutil.Error):
            cmdline = " ".join(process.cmdline())
            if "vllm" in cmdline and " serve " in cmdline:
                found.append(process)
    return found


def nothing_left(mark: Path | str, timeout: float = 30) -> bool:
    """Whether every process marked `mark` is gone within `timeout` seconds (no orphaned server or engine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not marked_processes(mark):
            return True
        time.sleep(0.5)
    return False
