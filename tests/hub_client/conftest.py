"""Fixtures of the bounded Hub request tests: the publish tests' isolation, family and built-in Hub
(tests/publish_family.py)."""

from tests.publish_family import family, hub, publish_isolation  # noqa: F401 (fixtures)
