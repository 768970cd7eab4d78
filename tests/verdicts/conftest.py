"""Fixtures of the verdict tests: the evaluation tests' fixture family, loaded with weights (tests/evaluation)."""

from __future__ import annotations

from tests.evaluation.conftest import family  # noqa: F401 (fixture)
