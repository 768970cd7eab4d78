"""`publish` never uses the eval jobs' read token: `HF_READ_TOKEN` is for source reads only
(hfrelease/files/sources.py), so with it set and no HF_TOKEN, publish has no token at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.hub import HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from tests.publish_family import TOKEN, fake_plugin_check


def test_publish_never_takes_the_read_token(family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a token the Hub would let write, set as HF_READ_TOKEN, is not publish's: a dry run, nothing pushed."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_READ_TOKEN", TOKEN)
    report = publish_family(load_manifest(family), hub=hub.url, plugin_checker=fake_plugin_check)
    assert report.dry_run and report.dry_run_reason is not None and "no Hub token" in report.dry_run_reason
    assert "repo-create" not in hub.stats()["requests"]
