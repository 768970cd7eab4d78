"""The demo's vendor repo: the build uploads its reference to a built-in Hub, and a working copy is pinned to it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hfrelease.errors import ConfigError
from tests.conftest import ROOT


def _reference(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + bytes(range(256)))
    (directory / "config.json").write_text('{"architectures": ["HfreleaseDemoForCausalLM"]}\n')
    return directory


def test_build_uploads_the_reference_once_and_pins_a_working_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vendor repo holds the reference at the recorded commit; a re-run uploads nothing; `pin` writes it."""
    from huggingface_hub import HfApi, constants

    from hfrelease.demo.vendor import VENDOR_REPO, pin_manifest, publish_vendor_repos, read_pins
    from hfrelease.hub import serve
    from hfrelease.sources import hub_access

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as in CI: only a loopback Hub is reachable
    out = tmp_path / "build"
    reference = _reference(out / "reference")
    files = {"reference/model.safetensors": "a" * 64, "reference/config.json": "b" * 64, "draft/x": "c" * 64}
    pins = publish_vendor_repos(out, reference=reference, stamp_files=files)
    assert read_pins(out) == pins and set(pins) == {VENDOR_REPO}
    assert publish_vendor_repos(out, reference=reference, stamp_files=files) == pins  # recorded: skipped

    server = serve(out / "hub")
    try:
        with hub_access(server.url):
            tree = HfApi(endpoint=server.url).list_repo_tree(VENDOR_REPO, revision=pins[VENDOR_REPO])
            listed = {f.path for f in tree}
    finally:
        server.shutdown()
    assert {"model.safetensors", "config.json", ".gitattributes"} <= listed

    family = tmp_path / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    (changed,) = pin_manifest(family / "release.toml", pins)
    assert pins[VENDOR_REPO] in changed
    from hfrelease.manifest import load_manifest

    source = load_manifest(family, check_files=False).reference.source
    assert (source.hub, source.revision) == (VENDOR_REPO, pins[VENDOR_REPO])


def test_pin_refuses_a_manifest_without_the_hub_source(tmp_path: Path) -> None:
    """Pinning a repo the manifest does not source from the Hub is an error, never a silent no-op."""
    from hfrelease.demo.vendor import pin_manifest

    manifest = tmp_path / "release.toml"
    manifest.write_text('source = { path = "../../build/demo/reference" }\n')
    with pytest.raises(ConfigError, match="no source"):
        pin_manifest(manifest, {"hfrelease-demo/tiny-reference": "0" * 40})
    assert manifest.read_text() == 'source = { path = "../../build/demo/reference" }\n'


def test_demo_manifest_sources_the_reference_from_the_hub_and_the_quants_locally() -> None:
    """Both kinds of source run in every demo: the reference pinned on the Hub, what the demo makes local."""
    from hfrelease.manifest import load_manifest

    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    reference = manifest.reference
    assert reference.source.hub == "hfrelease-demo/tiny-reference" and reference.source.revision
    assert reference.source.hub == reference.repo  # published from its own repo, as the flagship's quants
    assert all(a.source.path is not None for a in manifest.artifact if a.kind != "reference")
