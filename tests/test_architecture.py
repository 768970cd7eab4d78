"""ARCHITECTURE.md stays true to the tree: every package and top-level module named, every named path there."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

PACKAGE = ROOT / "hfrelease"


def _named() -> set[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    return {m.rstrip("/") for m in re.findall(r"`(hfrelease/[\w./]*)`", text)}


def test_every_path_named_exists() -> None:
    """A module or package the page names is in the tree (a move updates the page)."""
    missing = sorted(name for name in _named() if not (ROOT / name).exists())
    assert not missing, f"ARCHITECTURE.md names paths that are not in the tree: {missing}"


def test_every_package_and_top_level_module_is_named() -> None:
    """Each package under hfrelease/ and each module at its top is on the page (an addition updates it)."""
    packages = {init.parent.relative_to(ROOT).as_posix() for init in PACKAGE.rglob("__init__.py")
                if init.parent != PACKAGE}
    modules = {path.relative_to(ROOT).as_posix() for path in PACKAGE.glob("*.py")
               if path.name not in {"__init__.py", "__main__.py"}}
    unnamed = sorted((packages | modules) - _named())
    assert not unnamed, f"ARCHITECTURE.md does not name: {unnamed}"
