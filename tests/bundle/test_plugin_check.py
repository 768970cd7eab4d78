"""The vllm_plugin check: a real `pip install --no-deps` into a throwaway target, then its entry points."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.bundle import PluginCheckError, bundle_family, check_plugin
from hfrelease.manifest import load_manifest
from tests.publish_family import write_plugin


@pytest.mark.slow
def test_plugin_registering_with_vllm_passes(tmp_path: Path) -> None:
    """A package with a vllm.general_plugins entry point installs and reports it; its tree stays clean."""
    write_plugin(tmp_path / "p")
    report = check_plugin(tmp_path / "p", ["pyproject.toml", "tiny_plugin/__init__.py"])
    assert report.entry_points == ("tiny = tiny_plugin:register",)
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["pyproject.toml", "tiny_plugin"]


@pytest.mark.slow
def test_plugin_without_entry_point_is_refused(tmp_path: Path) -> None:
    """A package that installs but registers nothing with vLLM is refused with the fix."""
    write_plugin(tmp_path / "p", entry_point=False)
    with pytest.raises(PluginCheckError, match="registers nothing with vLLM") as caught:
        check_plugin(tmp_path / "p", ["pyproject.toml", "tiny_plugin/__init__.py"])
    assert "vllm.general_plugins" in (caught.value.hint or "")


def test_directory_without_packaging_is_refused(tmp_path: Path) -> None:
    """No pyproject.toml or setup.py: refused before pip is even started."""
    (tmp_path / "p").mkdir()
    with pytest.raises(PluginCheckError, match="not an installable package"):
        check_plugin(tmp_path / "p", ["x.py"], runner=lambda *a, **k: pytest.fail("pip ran"))


@pytest.mark.slow
def test_bundle_runs_the_real_check_once_per_plugin(family: Path) -> None:
    """bundle_family with the default checker installs the shared plugin once and records its entry point."""
    bundle = bundle_family(load_manifest(family))
    reports = {id(r.plugin) for r in bundle.repos}
    assert len(reports) == 1
    plugin = bundle.repos[0].plugin
    assert plugin is not None and plugin.entry_points == ("tiny = tiny_plugin:register",)
