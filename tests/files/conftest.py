"""Fixtures of the Hub-pinned source tests: the built-in Hub's (tests/hub_fixtures.py); every test's client
talks only to a local Hub."""

from __future__ import annotations

import pytest

from tests.files.test_hub_sources import hub_client, hub_family  # noqa: F401 (fixtures of test_read_token.py too)
from tests.hub_fixtures import api, hub, hub_root, repo  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def _isolated_client(isolated_hub_client: None) -> None:
    """Loopback only, no Xet, no token or cache of the person running the tests (tests/conftest.py)."""
