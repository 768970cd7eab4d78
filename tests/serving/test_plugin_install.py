"""Installing a family's vLLM plugin: once per environment, and never skipped for a different venv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hfrelease.serving.plugin import ensure_plugin

pytestmark = pytest.mark.unit


def test_plugin_stamp_is_per_venv(tmp_path: Path) -> None:
    """Two venvs of the same base Python each get the plugin installed (their bin/python are symlinks)."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text('[project]\nname = "x-demo-plugin"\nversion = "1"\n')
    calls: list[list[str]] = []

    def runner(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    for venv in ("a", "b"):
        bin_dir = tmp_path / venv / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "python").symlink_to(sys.executable)
        python = str(bin_dir / "python")
        assert ensure_plugin(plugin, python=python, runner=runner) is True
        assert ensure_plugin(plugin, python=python, runner=runner) is False
        assert (tmp_path / venv / ".hfrelease-plugins").is_dir()
    assert len(calls) == 2
    assert calls[0][:5] == [str(tmp_path / "a" / "bin" / "python"), "-m", "pip", "install", "--quiet"]


def test_stamp_without_the_distribution_reinstalls(tmp_path: Path) -> None:
    """For the running interpreter, a stamp is not enough: the distribution must really be installed."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text('[project]\nname = "x-surely-not-installed-plugin"\nversion = "1"\n')
    calls: list[list[str]] = []

    def runner(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    assert ensure_plugin(plugin, python=sys.executable, runner=runner) is True
    assert ensure_plugin(plugin, python=sys.executable, runner=runner) is True  # still not importable
    assert len(calls) == 2
