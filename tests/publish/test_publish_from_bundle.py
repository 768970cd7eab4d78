"""Publishing a bundle another job wrote: checked against its MANIFESTs first, attestation shipped beside them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import HfApi, snapshot_download

from hfrelease.bundle import ATTESTATION_NAME, BundleMismatchError, bundle_family, read_bundle, write_bundle
from hfrelease.hub import HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from tests.publish_family import TOKEN, fake_plugin_check


def _written(family: Path, out: Path) -> Path:
    write_bundle(bundle_family(load_manifest(family), plugin_checker=fake_plugin_check), out)
    return out


def test_a_written_bundle_reads_back_as_the_same_files(family: Path, tmp_path: Path) -> None:
    """read_bundle gives every repo the files (paths, sha256, sizes) bundle_family planned, MANIFEST included."""
    made = bundle_family(load_manifest(family), plugin_checker=fake_plugin_check)
    write_bundle(made, tmp_path / "out")
    read = read_bundle(load_manifest(family, check_files=False), tmp_path / "out")
    assert [(r.repo, r.content_hash) for r in read.repos] == [(r.repo, r.content_hash) for r in made.repos]
    for mine, theirs in zip(read.repos, made.repos, strict=True):
        assert [(f.path, f.sha256, f.size) for f in mine.files] == [(f.path, f.sha256, f.size) for f in theirs.files]


@pytest.mark.parametrize("tamper", ["changed", "unlisted", "missing"])
def test_a_bundle_that_differs_from_its_manifest_is_refused(family: Path, tmp_path: Path, tamper: str) -> None:
    """A changed, unlisted or missing file of any repo refuses the whole bundle, naming each file."""
    out = _written(family, tmp_path / "out")
    repo_dir = sorted(p for p in out.iterdir() if p.is_dir())[0]
    if tamper == "changed":
        (repo_dir / "config.json").write_text('{"architectures": ["Evil"]}')
    elif tamper == "unlisted":
        (repo_dir / "extra.py").write_text("print('hi')\n")
    else:
        (repo_dir / "config.json").unlink()
    with pytest.raises(BundleMismatchError) as info:
        read_bundle(load_manifest(family, check_files=False), out)
    assert f"{repo_dir.name}/" in info.value.message
    assert info.value.exit_code == 7


def test_publishing_from_a_bundle_ships_the_attestation(family: Path, api: HfApi, hub: HubServer,
                                                        tmp_path: Path) -> None:
    """publish_family(from_bundle=...) uploads the bundle's files plus MANIFEST.sigstore.json, and nothing else."""
    out = _written(family, tmp_path / "out")
    attestation = tmp_path / "attestation.json"
    attestation.write_text(json.dumps({"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}))

    def no_build(*_: object) -> object:
        raise AssertionError("publishing a bundle made elsewhere builds nothing")

    report = publish_family(load_manifest(family, check_files=False), api=api, from_bundle=out,
                            attestation=attestation, plugin_checker=no_build)  # type: ignore[arg-type]
    assert report.outcome is not None and report.outcome.status == "published"
    for plan in report.plan.repos:
        snapshot = Path(snapshot_download(plan.repo, revision="v1.0", endpoint=hub.url, token=TOKEN,
                                          cache_dir=tmp_path / "dl"))
        assert (snapshot / ATTESTATION_NAME).read_bytes() == attestation.read_bytes()
        on_disk = {p.relative_to(out / plan.bundle.artifact_id).as_posix()
                   for p in (out / plan.bundle.artifact_id).rglob("*") if p.is_file()}
        assert {f.path for f in plan.bundle.files} == on_disk | {ATTESTATION_NAME}
