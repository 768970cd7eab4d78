"""`hfrelease bundle`'s stage and view: what it says when the selection publishes no repo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CliRun
from tests.publish_family import make_family

pytestmark = pytest.mark.unit


def test_bundle_says_when_there_is_nothing_to_publish(tmp_path: Path, cli: CliRun) -> None:
    """Only artifacts with `publish = false` selected: bundle says nothing will be published and which
    artifacts `publish = false` left out (exit 0: nothing is wrong, there is just nothing to ship)."""
    family = make_family(tmp_path / "family")
    code, out, err = cli(["bundle", str(family), "--artifact", "ref"])
    assert code == 0, err
    said = " ".join(err.split())
    assert "nothing to publish: the selected artifacts (ref) all have `publish = false`" in said
    code, out, err = cli(["bundle", str(family), "--artifact", "ref", "--json"])
    assert code == 0 and json.loads(out)["repos"] == [] and json.loads(out)["unpublished"] == ["ref"]
    # Every artifact unpublished: the whole family has nothing to publish.
    manifest = family / "release.toml"
    manifest.write_text(manifest.read_text().replace("publish = true", "publish = false"))
    code, _, err = cli(["bundle", str(family)])
    assert code == 0, err
    assert "nothing to publish: the family's artifacts (ref, q0, q1) all have" in " ".join(err.split())
