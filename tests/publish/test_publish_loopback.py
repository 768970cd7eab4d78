"""`publish` and `verify` to a Hub on this machine other than `--hub local`, with offline mode on.

`scripts/offline.sh` (and CI) set HF_HUB_OFFLINE=1, which keeps huggingface_hub off the internet, not off
this machine: a Hub on a loopback address is reached as `--hub local` is. The Hub here is the built-in one
on its own port, run as an independent emulator would be; "no collections route" is its fault injection
answering the collection calls 404, as it answers any route it does not have.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hfrelease.errors import ExitCode
from hfrelease.files.sources import hub_access
from hfrelease.hub import FaultRule, HubServer
from hfrelease.manifest import load_manifest
from tests.conftest import CliRun
from tests.publish_family import TOKEN, make_family


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline mode on, as scripts/offline.sh sets it, and the Hub's token in HF_TOKEN."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_TOKEN", TOKEN)


@pytest.fixture
def plain_family(tmp_path: Path) -> Path:
    """A family without a serve plugin (bundling it would build the plugin with pip)."""
    family = make_family(tmp_path / "family")
    toml = family / "release.toml"
    toml.write_text(toml.read_text().replace('[serve]\nplugin = "vllm_plugin"\n', ""))
    return family


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_publish_to_a_loopback_hub_without_collections_under_offline_mode(
    host: str, plain_family: Path, hub: HubServer, offline: None, cli: CliRun
) -> None:
    """`publish --hub http://HOST:PORT` under HF_HUB_OFFLINE=1 releases every repo (before: exit 1, "internal
    error: OfflineModeIsEnabled"); a Hub without collections gets a warning, exit 0 (before: exit 7 after
    tagging every repo); the MANIFESTs are kept, so `verify --hub` checks the Hub against them."""
    hub.faults.add(FaultRule(endpoint="collection-create", status=404, times=None))
    url = hub.url.replace("127.0.0.1", host)
    repos = [a.repo for a in load_manifest(plain_family).artifact if a.publish]

    code, _, err = cli(["publish", str(plain_family), "--hub", url])

    assert code == 0, err
    flat = " ".join(err.split())
    assert "collection 'Tiny family' not made, this Hub has no collections" in flat
    assert "remove `collection` from [publish]" in flat
    api = HfApi(endpoint=hub.url, token=TOKEN)
    with hub_access(hub.url):
        for repo in repos:
            assert {t.name: t.target_commit for t in api.list_repo_refs(repo).tags} == {
                "v1.0": api.list_repo_commits(repo)[0].commit_id
            }
    code, out, err = cli(["verify", str(plain_family), "--hub", url, "--json"])
    assert code == 0, err
    verified = json.loads(out)["verified"]
    assert [r["repo"] for r in verified] == repos
    assert all("local bundle" in r["compared_with"] and not r["problems"] for r in verified)


def test_a_publish_that_stops_after_tagging_keeps_its_manifests_for_verify(
    plain_family: Path, hub: HubServer, offline: None, cli: CliRun
) -> None:
    """The collection fails for another reason (a 500) once every repo is tagged: exit 7, and `verify` still
    compares the Hub with the MANIFESTs this publish kept (before: none were kept, so nothing to compare)."""
    hub.faults.add(FaultRule(endpoint="collection-create", status=500, times=None))

    code, _, err = cli(["publish", str(plain_family), "--hub", hub.url])

    assert code == ExitCode.PUBLISH_FAILED and "is published (every repo committed and tagged" in " ".join(err.split())
    kept = plain_family / ".hfrelease" / "bundle" / "v1.0"
    assert sorted(p.parent.name for p in kept.glob("*/MANIFEST")) == ["q0", "q1"]
    code, out, err = cli(["verify", str(plain_family), "--hub", hub.url, "--json"])
    assert code == 0, err
    assert all("local bundle" in r["compared_with"] for r in json.loads(out)["verified"])


def test_publish_to_a_hub_off_this_machine_under_offline_mode_says_so(
    plain_family: Path, offline: None, cli: CliRun
) -> None:
    """HF_HUB_OFFLINE=1 and a Hub on the network: exit 7 naming the setting (before: exit 1, "a bug")."""
    code, _, err = cli(["publish", str(plain_family), "--hub", "https://hub.example.org"])

    assert code == ExitCode.PUBLISH_FAILED, err
    flat = " ".join(err.split())
    assert "HF_HUB_OFFLINE=1 keeps huggingface_hub from reaching a Hub off this machine" in flat
    assert "internal error" not in flat
