"""Shared fixtures: the repository's paths, and the offline environment every test runs in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

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
