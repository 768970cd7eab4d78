"""No module of the package is over 500 lines: a module that grows past it is split along a seam of its own."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

PACKAGE = ROOT / "hfrelease"
MAX_LINES = 500
# Modules allowed over the limit while their split is under way (issue 12). Empty: the cards split landed.
NOT_YET_SPLIT: frozenset[str] = frozenset()


def _lines() -> dict[str, int]:
    return {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in PACKAGE.rglob("*.py")}


def test_no_module_is_over_the_limit() -> None:
    """Every module under hfrelease/ has at most 500 lines, the few listed as not yet split aside."""
    over = {name: count for name, count in sorted(_lines().items())
            if count > MAX_LINES and name not in NOT_YET_SPLIT}
    assert not over, f"modules over {MAX_LINES} lines (split each along a seam of its own): {over}"

