"""Fixtures for card tests: the demo family over its recorded ledger, and Nanbeige on the fly."""

from __future__ import annotations

import pytest
from card_fixtures import LEDGER_DEMO, ROOT, nanbeige_inputs
from card_fixtures import demo_manifest as load_demo_manifest

from hfrelease.cards import CardInputs, read_inputs
from hfrelease.manifest import Manifest, load_manifest


@pytest.fixture(scope="session")
def demo_manifest() -> Manifest:
    """The demo family's manifest, which its recorded ledger measured."""
    return load_demo_manifest()


@pytest.fixture(scope="session")
def demo_inputs(demo_manifest: Manifest) -> CardInputs:
    """The demo family with the recorded ledger in tests/fixtures/ledger_demo/."""
    return read_inputs(demo_manifest, ledger_root=LEDGER_DEMO)


@pytest.fixture(scope="session")
def nanbeige_manifest() -> Manifest:
    return load_manifest(ROOT / "model_cards" / "nanbeige4.2-3b", check_files=False)


@pytest.fixture(scope="session")
def nanbeige(nanbeige_manifest: Manifest) -> CardInputs:
    return nanbeige_inputs(nanbeige_manifest)
