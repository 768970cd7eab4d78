"""Bundle and publish of Hub-pinned artifacts: a vendor's repo as a source, and a repo published from itself."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from hfrelease.bundle import bundle_family
from hfrelease.errors import PublishError
from hfrelease.hub import HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from tests.publish_family import fake_plugin_check, set_version, write_weights


@pytest.fixture(autouse=True)
def _default_endpoint(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What HF_ENDPOINT=<hub.url> sets when huggingface_hub is imported, with offline mode on (as in CI)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def _push_checkpoint(api: HfApi, repo: str, checkpoint: Path, extra: dict[str, bytes] | None = None) -> str:
    """Upload a checkpoint directory (plus `extra` files) as one commit; returns the commit id."""
    api.create_repo(repo, exist_ok=True)
    ops = [CommitOperationAdd(path_in_repo=p.relative_to(checkpoint).as_posix(), path_or_fileobj=p)
           for p in sorted(checkpoint.rglob("*")) if p.is_file()]
    ops += [CommitOperationAdd(path_in_repo=name, path_or_fileobj=data) for name, data in (extra or {}).items()]
    return api.create_commit(repo, operations=ops, commit_message="upload").oid


def _pin(family: Path, ident: str, repo: str, revision: str) -> None:
    toml = family / "release.toml"
    text = toml.read_text()
    old = f'source = {{ path = "checkpoints/{ident}" }}'
    assert old in text
    toml.write_text(text.replace(old, f'source = {{ hub = "{repo}", revision = "{revision}" }}'))


def test_bundle_of_a_hub_source_takes_its_gitattributes_and_never_names_the_cache(
    family: Path, api: HfApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Hub snapshot's .gitattributes (every repo has one) is the repo's; its other files are noted by Hub path."""
    from huggingface_hub import constants

    from hfrelease.files.sources import hub_content_hash

    checkpoint = family / "checkpoints" / "q0"
    revision = _push_checkpoint(api, "vendor/Tiny-1M-Q0", checkpoint, {"LICENSE": b"MIT\n", "notes/how.md": b"x\n"})
    shutil.rmtree(checkpoint)  # the declared train_command.txt now comes from elsewhere: undeclare it
    toml = family / "release.toml"
    toml.write_text(toml.read_text().replace('files = ["checkpoints/q0/train_command.txt"]', ""))
    _pin(family, "q0", "vendor/Tiny-1M-Q0", revision)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # only the loopback Hub is reachable
    bundle = bundle_family(load_manifest(family), plugin_checker=fake_plugin_check, artifacts=["q0"])
    (repo,) = bundle.repos
    paths = [f.path for f in repo.files]
    assert ".gitattributes" not in paths and "model.safetensors" in paths and "config.json" in paths
    assert repo.content_hash == hub_content_hash("vendor/Tiny-1M-Q0", revision).sha256
    (note,) = [n for n in repo.notes if "not carried over" in n]
    assert f"vendor/Tiny-1M-Q0@{revision[:12]}" in note and "LICENSE" in note and "notes/how.md" in note
    assert "hf-cache" not in " ".join(repo.notes) and repo.pinned is None


def test_a_repo_published_from_itself_keeps_its_weights_and_sends_none(
    family: Path, api: HfApi, hub: HubServer, tmp_path: Path
) -> None:
    """source.hub == repo: the release commit adds the card on top; no weight byte is downloaded or uploaded."""
    repo = "alice/Tiny-1M-Q0"
    weights = (family / "checkpoints" / "q0" / "model.safetensors").read_bytes()
    revision = _push_checkpoint(api, repo, family / "checkpoints" / "q0")
    _pin(family, "q0", repo, revision)
    hub.reset_stats()
    report = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, artifacts=["q0"])
    assert report.outcome is not None and report.outcome.status == "published"
    (plan,) = report.plan.repos
    assert plan.bundle.pinned == revision
    assert "model.safetensors" in plan.changes.unchanged
    assert hub.stats()["file_bytes_received"] < len(weights)  # the card and friends, never the weights
    weight_file = next(f for f in plan.bundle.files if f.path == "model.safetensors")
    assert weight_file.in_repo and weight_file.source is None  # identified from the listing: never downloaded
    assert all(b.stat().st_size < len(weights) for b in (tmp_path / "hf-cache").rglob("blobs/*"))
    commits = [c.commit_id for c in api.list_repo_commits(repo)]
    assert revision in commits and commits[0] != revision  # the release sits on top of the pinned commit
    tagged = {f.path for f in api.list_repo_tree(repo, revision="v1.0", recursive=True)}
    assert {"model.safetensors", "README.md", "MANIFEST"} <= tagged


def test_a_repo_whose_weights_moved_since_the_pin_is_refused(family: Path, api: HfApi, tmp_path: Path) -> None:
    """New weights pushed after the pin: publishing would describe or overwrite them, so nothing is written."""
    repo = "alice/Tiny-1M-Q0"
    revision = _push_checkpoint(api, repo, family / "checkpoints" / "q0")
    newer = tmp_path / "newer.safetensors"
    write_weights(newer, 4096, seed=99)
    api.upload_file(path_or_fileobj=newer, path_in_repo="model.safetensors", repo_id=repo)
    head = api.list_repo_commits(repo)[0].commit_id
    _pin(family, "q0", repo, revision)
    set_version(family, "1.1")
    with pytest.raises(PublishError, match=re.escape(f"pinned at {revision[:12]}")):
        publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, artifacts=["q0"])
    assert api.list_repo_commits(repo)[0].commit_id == head  # nothing was written
