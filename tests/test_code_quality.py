"""The codebase stays ruff-clean and mypy-strict-clean (the project's standard, enforced in CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.allow_subprocess
def test_ruff_clean() -> None:
    """ruff reports nothing on the package, tests and benchmarks."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "hfrelease", "tests", "benchmarks"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.allow_subprocess
@pytest.mark.slow
def test_mypy_strict_clean() -> None:
    """mypy --strict (configured in pyproject.toml) reports nothing on the package."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
