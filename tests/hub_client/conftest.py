"""Fixtures of the bounded Hub request tests: the publish tests' isolation (tests/publish_family.py)."""

from tests.publish_family import publish_isolation  # noqa: F401 (fixture)
