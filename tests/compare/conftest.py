"""Fixtures of the compare tests: the publish tests' family and Hub (tests/publish_family.py), for comparing
release tags read back from the built-in Hub."""

from tests.publish_family import api, family, hub, manifest, publish_isolation  # noqa: F401 (fixtures)
