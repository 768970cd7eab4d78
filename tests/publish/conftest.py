"""Fixtures of the publish tests (tests/publish_family.py); every test isolated from the person running it."""

from __future__ import annotations

import pytest

from tests.publish_family import api, cache, family, hub, manifest, publish_isolation  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def _isolated_client(request: pytest.FixtureRequest) -> None:
    """Loopback only, no Xet, no token or cache of the person running the tests, a hash cache of the test's own."""
    request.getfixturevalue("publish_isolation")
