"""Tests mirror the package layout: each folder under tests/ is named for a package or top-level module of hfrelease."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

PACKAGE = ROOT / "hfrelease"
TESTS = ROOT / "tests"
# Not tests: fixture files (small real families, ledgers, schemas) and pytest's own litter.
NOT_TESTS = {"fixtures", "__pycache__"}


def _names() -> set[str]:
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    modules = {path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("_")}
    return packages | modules


def test_every_test_folder_names_a_package_or_module() -> None:
    """Every tests/<folder> (fixtures aside) is hfrelease/<folder>/ or hfrelease/<folder>.py: the marker, not
    the folder, says a test is slow."""
    folders = {path.name for path in TESTS.iterdir() if path.is_dir() and path.name not in NOT_TESTS}
    assert folders, "no test folders found"
    strays = sorted(folders - _names())
    assert not strays, f"tests/{strays[0]}/ names no package or module under hfrelease/; move its tests there"


def test_no_test_folder_is_a_kind_of_test() -> None:
    """The old folders by kind (unit, integration, failures, ci) stay gone: `slow` and `unit` are markers. A
    folder of one of those names that mirrors a package is the package's (tests/ci: `hfrelease/ci/`)."""
    kinds = {"unit", "integration", "failures", "ci"} - _names()
    assert not kinds & {path.name for path in TESTS.iterdir()}
