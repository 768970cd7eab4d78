"""Fixtures of the slow tests: the demo family built once, family copies with empty ledgers, marked processes.

The demo family is built by the real builder (training on the CPU, llm-compressor in its own venv) into
build/demo/, the directory `model_cards/demo/release.toml` points at, and reused across runs when the
builder's stamp says it is complete. Each test that records results works on a copy of the family
directory so that the repository's own ledger is never touched.

A plugin registered by tests/conftest.py, not a directory's conftest: the session-scoped fixtures below
(the build, the vendor Hub's server) are then one fixture each, set up once per session for every folder
that uses them.
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

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "demo"


@pytest.fixture(scope="session")
def vllm_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """vLLM on the CPU, offline, with its caches in the session's temp dir (the modules that start vLLM use it)."""
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


@pytest.fixture(scope="session")
def vendor_hub(demo_build: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo's vendor repos (its reference and draft, uploaded by the build) on a built-in Hub: huggingface_hub's
    endpoint.

    A copy of build/demo/hub (one server owns a root), served for the session. `HF_ENDPOINT` is set for CLI
    subprocesses and huggingface_hub's constants for this process (it reads the variable once, at import);
    offline mode stays on (only a loopback Hub is reachable with it, see hfrelease.files.sources). A fresh
    Hugging Face cache, so the download is really made.
    """
    from huggingface_hub import constants

    from hfrelease.demo.vendor import HUB_DIR
    from hfrelease.hub import serve

    root = tmp_path_factory.mktemp("vendor-hub") / "hub"
    shutil.copytree(BUILD / HUB_DIR, root)
    cache = str(tmp_path_factory.mktemp("hf-cache"))
    server = serve(root)
    saved = (constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_CACHE)
    saved_env = {name: os.environ.get(name) for name in ("HF_ENDPOINT", "HF_HUB_CACHE")}
    os.environ.update(HF_ENDPOINT=server.url, HF_HUB_CACHE=cache)
    constants.ENDPOINT = server.url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = server.url + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_CACHE = cache
    try:
        yield server.url
    finally:
        constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_CACHE = saved
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.shutdown()


@pytest.fixture
def demo_family(tmp_path: Path, demo_build: dict[str, Path], vendor_hub: str) -> Path:
    """A copy of model_cards/demo with an empty ledger, whose relative paths still reach build/demo.

    Its reference and draft are the vendor's Hub repos, pinned to this machine's build, and the draft's and the
    EAGLE-3 head's training files are that build's (`hfrelease demo pin`).
    """
    from hfrelease.demo.eagle3_training import EAGLE3_TRAINING
    from hfrelease.demo.vendor import copy_training, pin_manifest, read_pins

    target = tmp_path / "model_cards" / "demo"
    shutil.copytree(
        ROOT / "model_cards" / "demo", target, ignore=shutil.ignore_patterns("results", "build", "*.egg-info")
    )
    (tmp_path / "build").symlink_to(ROOT / "build")
    (target / "results").mkdir()
    pin_manifest(target / "release.toml", read_pins(BUILD))
    copy_training(BUILD, target)  # the draft's declared training provenance, this build's (as `demo pin` does)
    copy_training(BUILD, target, EAGLE3_TRAINING)  # and the EAGLE-3 head's
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
