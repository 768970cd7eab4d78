"""The demo's vendor repos: the build uploads its reference and draft to a built-in Hub; a working copy is pinned."""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from hfrelease.errors import ConfigError, EnvironmentProblem
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("isolated_hub_client")


def _checkpoint(directory: Path, seed: int) -> Path:
    directory.mkdir(parents=True)
    (directory / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + bytes([seed]) * 256)
    (directory / "config.json").write_text('{"architectures": ["HfreleaseDemoForCausalLM"]}\n')
    return directory


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A build directory with a reference and a draft checkpoint, and the stamp's sha256 per file."""
    from huggingface_hub import constants

    from hfrelease.speed.plan import file_sha256

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as in CI: only a loopback Hub is reachable
    out = tmp_path / "build"
    for index, name in enumerate(("reference", "draft", "fp8-dynamic")):
        _checkpoint(out / name, index)
    files = {p.relative_to(out).as_posix(): file_sha256(p) for p in sorted(out.rglob("*")) if p.is_file()}
    return out, files


@pytest.fixture
def uploads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The repos each `publish_vendor_repos` call uploaded (one list per call that started the Hub)."""
    from hfrelease.demo import vendor

    calls: list[list[str]] = []
    real = vendor._upload

    def counted(out_dir: Path, folders: dict[str, Path]) -> dict[str, str]:
        calls.append(sorted(folders))
        return real(out_dir, folders)

    monkeypatch.setattr(vendor, "_upload", counted)
    return calls


@pytest.fixture
def served(build: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The build's Hub served as huggingface_hub's endpoint (what HF_ENDPOINT sets), with a fresh cache."""
    from huggingface_hub import constants

    from hfrelease.hub import serve

    server = serve(build[0] / "hub")
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        server.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    yield server.url
    server.shutdown()


def _family(tmp_path: Path, pins: dict[str, str], build: Path) -> Path:
    """A copy of model_cards/demo pinned to `pins`, its paths and prompts pointed at `build` (no real build)."""
    from hfrelease.demo.vendor import pin_manifest

    family = tmp_path / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    pin_manifest(family / "release.toml", pins)
    data = tomllib.loads((family / "release.toml").read_text())
    for artifact in data["artifact"]:
        if "path" in artifact["source"]:
            artifact["source"]["path"] = str(build / "fp8-dynamic")
    prompts = tmp_path / "chat.jsonl"
    prompts.write_text('{"prompt": "2+2?"}\n')
    data["workload"] = [{**w, "prompts": str(prompts)} for w in data["workload"]]
    (family / "release.toml").write_text(tomli_w.dumps(data))
    return family


def test_build_uploads_each_vendor_repo_once_and_pins_a_working_copy(
    build: tuple[Path, dict[str, str]], uploads: list[list[str]], tmp_path: Path
) -> None:
    """Reference and draft are their own repos at the recorded commits; a re-run uploads nothing; `pin` writes both."""
    from huggingface_hub import HfApi

    from hfrelease.demo.vendor import DRAFT_REPO, REFERENCE_REPO, pin_manifest, publish_vendor_repos, read_pins
    from hfrelease.files.sources import hub_access
    from hfrelease.hub import serve

    out, files = build
    pins = publish_vendor_repos(out, stamp_files=files)
    assert read_pins(out) == pins and set(pins) == {REFERENCE_REPO, DRAFT_REPO}
    assert publish_vendor_repos(out, stamp_files=files) == pins
    assert uploads == [[DRAFT_REPO, REFERENCE_REPO]]  # the second call found both recorded

    server = serve(out / "hub")
    try:
        with hub_access(server.url):
            listed = {repo: {f.path for f in HfApi(endpoint=server.url).list_repo_tree(repo, revision=revision)}
                      for repo, revision in pins.items()}
    finally:
        server.shutdown()
    assert all({"model.safetensors", "config.json", ".gitattributes"} <= names for names in listed.values())

    family = tmp_path / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    changed = pin_manifest(family / "release.toml", pins)
    assert len(changed) == 2 and all(any(revision in line for line in changed) for revision in pins.values())
    from hfrelease.manifest import load_manifest

    manifest = load_manifest(family, check_files=False)
    sources = {a.id: (a.source.hub, a.source.revision) for a in manifest.artifact if a.source.hub}
    assert sources == {"reference": (REFERENCE_REPO, pins[REFERENCE_REPO]), "draft": (DRAFT_REPO, pins[DRAFT_REPO])}


def test_a_build_with_only_the_reference_uploaded_is_upgraded_in_place(
    build: tuple[Path, dict[str, str]], uploads: list[list[str]]
) -> None:
    """An older build's vendor.json (the reference only) gains the draft repo; the reference keeps its commit."""
    from hfrelease.demo.vendor import DRAFT_REPO, PINS_FILE, REFERENCE_REPO, publish_vendor_repos, read_pins

    out, files = build
    (old,) = publish_vendor_repos(out, stamp_files=files, repos={REFERENCE_REPO: "reference"}).values()
    reference_files = {p: s for p, s in files.items() if p.startswith("reference/")}
    # What a build made before the draft was a vendor repo recorded.
    (out / PINS_FILE).write_text(json.dumps({"pins": {REFERENCE_REPO: old}, "files": reference_files}))
    with pytest.raises(EnvironmentProblem, match="not all recorded") as refused:
        read_pins(out)
    assert "hfrelease demo build" in (refused.value.hint or "")

    pins = publish_vendor_repos(out, stamp_files=files)
    assert pins[REFERENCE_REPO] == old  # re-uploading identical files makes no commit
    assert read_pins(out) == pins and set(pins) == {REFERENCE_REPO, DRAFT_REPO}
    publish_vendor_repos(out, stamp_files=files)
    assert uploads == [[REFERENCE_REPO], [DRAFT_REPO, REFERENCE_REPO]]
    # An older hfrelease reading the same build still finds the reference alone, as it expects.
    recorded = json.loads((out / PINS_FILE).read_text())
    assert recorded["pins"] == {REFERENCE_REPO: old} and recorded["files"] == reference_files

    changed = {**files, "draft/model.safetensors": "0" * 64}
    publish_vendor_repos(out, stamp_files=changed)
    assert uploads[-1] == [DRAFT_REPO]  # only the repo whose files changed


def test_a_hub_sourced_draft_is_identified_by_the_hubs_lfs_sha256_and_served_from_its_snapshot(
    build: tuple[Path, dict[str, str]], served: str, tmp_path: Path
) -> None:
    """Unread, a Hub draft is identified by its LFS sha256; downloaded, by the same hash, served from the snapshot."""
    from hfrelease.demo.vendor import DRAFT_REPO, publish_vendor_repos
    from hfrelease.files.hashing import hash_artifact
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.speed.plan import plan_speed
    from hfrelease.speed.runner import serve_command

    out, files = build
    family = _family(tmp_path, publish_vendor_repos(out, stamp_files=files), out)
    manifest = load_manifest(family, check_files=False)
    local = hash_artifact(out / "draft")

    judged = plan_speed(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["draft"],
                        download=False)
    drafted = [job for job in judged.servers if job.draft is not None and job.draft.id == "draft"]
    assert drafted and all(job.draft_dir is None for job in drafted)
    content = drafted[0].draft_content
    assert content is not None and content.sha256 == local.sha256 and content.bytes_read == 0

    measured = plan_speed(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["draft"])
    job = next(job for job in measured.servers if job.draft is not None and job.draft.id == "draft")
    assert job.draft_dir is not None and job.draft_content is not None and job.draft_content.sha256 == local.sha256
    assert job.draft_dir.parent.name == "snapshots" and DRAFT_REPO.replace("/", "--") in str(job.draft_dir)
    argv = serve_command(measured, job, port=8000).argv
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config["model"] == str(job.draft_dir) and "revision" not in config


def test_pin_refuses_a_manifest_without_the_hub_source(tmp_path: Path) -> None:
    """Pinning a repo the manifest does not source from the Hub is an error, never a silent no-op."""
    from hfrelease.demo.vendor import pin_manifest

    manifest = tmp_path / "release.toml"
    manifest.write_text('source = { path = "../../build/demo/reference" }\n')
    with pytest.raises(ConfigError, match="no source"):
        pin_manifest(manifest, {"hfrelease-demo/tiny-reference": "0" * 40})
    assert manifest.read_text() == 'source = { path = "../../build/demo/reference" }\n'


def test_demo_manifest_sources_the_vendor_repos_from_the_hub_and_what_it_makes_locally() -> None:
    """Both kinds of source run in every demo: reference and draft on the Hub, quants and the EAGLE-3 head local."""
    from hfrelease.demo.vendor import VENDOR_REPOS
    from hfrelease.manifest import load_manifest

    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    hub = {a.id: a for a in manifest.artifact if a.source.hub is not None}
    assert {a.source.hub: a.id for a in hub.values()} == dict(VENDOR_REPOS)
    # Published from their own repos, as the flagship's quants and EAGLE-3 head: the release adds the cards.
    assert all(a.source.hub == a.repo and a.source.revision for a in hub.values())
    local = [a for a in manifest.artifact if a.id not in hub]
    assert all(a.source.path is not None for a in local) and any(a.kind == "draft" for a in local)


def _main_weights(hub_root: Path, repo: str, revision: str = "main") -> str:
    """The sha256 of `repo`'s model.safetensors at `revision` on the Hub in `hub_root` (its LFS pointer's)."""
    from huggingface_hub import HfApi

    from hfrelease.files.sources import hub_access
    from hfrelease.hub import serve

    server = serve(hub_root)
    try:
        with hub_access(server.url):
            (entry,) = [f for f in HfApi(endpoint=server.url).list_repo_tree(repo, revision=revision)
                        if f.path == "model.safetensors"]
    finally:
        server.shutdown()
    assert entry.lfs is not None
    return str(entry.lfs.sha256)


def test_the_drafts_previous_head_is_the_commit_before_its_head(
    build: tuple[Path, dict[str, str]], uploads: list[list[str]]
) -> None:
    """The previous head is uploaded first, the head on top (main holds the head); a re-run uploads nothing."""
    from hfrelease.demo.vendor import DRAFT_REPO, REFERENCE_REPO, publish_vendor_repos, read_pins, read_previous_pins
    from hfrelease.speed.plan import file_sha256

    out, files = build
    with pytest.raises(EnvironmentProblem, match="previous heads"):
        read_previous_pins(out)
    _checkpoint(out / "draft-previous", 7)
    files = {**files, **{p.relative_to(out).as_posix(): file_sha256(p) for p in (out / "draft-previous").iterdir()}}
    pins = publish_vendor_repos(out, stamp_files=files)
    (previous,) = read_previous_pins(out).values()
    assert uploads == [[DRAFT_REPO], [DRAFT_REPO, REFERENCE_REPO]] and read_pins(out) == pins
    assert previous != pins[DRAFT_REPO]
    assert _main_weights(out / "hub", DRAFT_REPO) == files["draft/model.safetensors"]
    assert _main_weights(out / "hub", DRAFT_REPO, previous) == files["draft-previous/model.safetensors"]
    assert publish_vendor_repos(out, stamp_files=files) == pins and len(uploads) == 2


def test_the_previous_release_pins_the_previous_head_and_keeps_what_the_comparison_needs(
    build: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """v0.0: version, draft and target only, the previous head pinned with its provenance; main holds each head."""
    from hfrelease.demo.vendor import DRAFT_REPO, publish_vendor_repos, read_pins, read_previous_pins
    from hfrelease.demo.versions import push_heads, write_previous_family
    from hfrelease.manifest import load_manifest
    from hfrelease.speed.plan import file_sha256

    out, files = build
    _checkpoint(out / "draft-previous", 7)
    files = {**files, **{p.relative_to(out).as_posix(): file_sha256(p) for p in (out / "draft-previous").iterdir()}}
    for epoch in (0, 1):
        (out / "draft-previous-training" / str(epoch)).mkdir(parents=True)
        (out / "draft-previous-training" / str(epoch) / "val_metrics.json").write_text('{"loss_epoch": 1.0}')
    (out / "draft-previous-training" / "train_command.txt").write_text("hfrelease demo build --seed 0\n")
    publish_vendor_repos(out, stamp_files=files)
    family = _family(tmp_path, read_pins(out), out)
    write_previous_family(family, out)
    manifest = load_manifest(family, check_files=False)
    assert manifest.family.version == "0.0" and not manifest.gate
    assert [a.id for a in manifest.artifact] == ["reference", "draft"]
    draft = manifest.artifact[1]
    assert draft.source.revision == read_previous_pins(out)[DRAFT_REPO]
    assert draft.draft is not None and draft.draft.min_acceptance_rate is None and draft.draft.min_speedup is None
    assert sorted(draft.files) == ["draft-training/0/val_metrics.json", "draft-training/1/val_metrics.json",
                                   "draft-training/train_command.txt"]
    assert all((family / f).is_file() for f in draft.files)
    assert {s.id for s in manifest.speculative} == {"draft"}
    assert manifest.workload and all(w.speculative == ["none", "draft"] for w in manifest.workload)

    hub = tmp_path / "demo-hub"
    shutil.copytree(out / "hub", hub)
    push_heads(hub, out, read_previous_pins(out))
    assert _main_weights(hub, DRAFT_REPO) == files["draft-previous/model.safetensors"]
    push_heads(hub, out, read_pins(out))
    assert _main_weights(hub, DRAFT_REPO) == files["draft/model.safetensors"]


def test_the_previous_release_serves_the_previous_eagle3_head_from_the_build(
    build: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """The trained EAGLE-3 head is a local build directory: v0.0 serves the build's previous head (non-thinking data
    only) with that head's provenance in the head's declared place, on the workloads serving it on its FP8 target;
    its acceptance floor goes (measured to be compared with), its losslessness bound stays."""
    from hfrelease.demo.vendor import publish_vendor_repos, read_pins
    from hfrelease.demo.versions import write_previous_family
    from hfrelease.manifest import load_manifest
    from hfrelease.speed.plan import file_sha256

    out, files = build
    _checkpoint(out / "draft-previous", 7)
    files = {**files, **{p.relative_to(out).as_posix(): file_sha256(p) for p in (out / "draft-previous").iterdir()}}
    for training in ("draft-previous-training", "eagle3-previous-training"):
        (out / training / "0").mkdir(parents=True)
        (out / training / "0" / "val_metrics.json").write_text('{"loss_epoch": 2.0}')
        (out / training / "train_command.txt").write_text("hfrelease demo build --seed 0\n")
    publish_vendor_repos(out, stamp_files=files)
    family = _family(tmp_path, read_pins(out), out)
    data = tomllib.loads((family / "release.toml").read_text())
    eagle3 = next(a for a in data["artifact"] if a["id"] == "eagle3")
    eagle3["source"]["path"] = str(out / "eagle3")  # `_family` pointed every local source at the FP8 quant
    (family / "release.toml").write_text(tomli_w.dumps(data))

    changes = write_previous_family(family, out)
    manifest = load_manifest(family, check_files=False)
    assert [a.id for a in manifest.artifact] == ["reference", "fp8-dynamic", "draft", "eagle3"]
    head = manifest.artifact_by_id("eagle3")
    assert head.source.path == str(out / "eagle3-previous")
    assert head.files == ["eagle3-training/0/val_metrics.json", "eagle3-training/train_command.txt"]
    assert (family / "eagle3-training" / "0" / "val_metrics.json").read_text() == '{"loss_epoch": 2.0}'
    assert head.draft is not None and head.draft.target == "fp8-dynamic"
    assert head.draft.min_acceptance_rate is None and head.draft.min_identical_outputs == 0.75
    assert head.draft.trained_with is not None and head.draft.trained_with.endswith("thinking off only")
    assert head.description is not None and "non-thinking" in head.description
    assert {s.id for s in manifest.speculative} == {"draft", "eagle3"}
    served = {w.id: (w.artifacts, w.speculative) for w in manifest.workload}
    assert served["verifier-chat"] == (["fp8-dynamic"], ["none", "eagle3"])
    assert served["verifier-think"] == (["fp8-dynamic"], ["none", "eagle3"])
    assert any("eagle3: the previous head" in line for line in changes)


def test_the_pin_and_previous_steps_say_each_thing_they_do(build: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """`demo previous` then `demo pin` (their functions): each write, copy and push is one line, in that order."""
    from hfrelease.demo.vendor import DRAFT_REPO, publish_vendor_repos, read_pins
    from hfrelease.demo.versions import make_previous_release, pin_working_copy
    from hfrelease.speed.plan import file_sha256

    out, files = build
    _checkpoint(out / "draft-previous", 7)
    files = {**files, **{p.relative_to(out).as_posix(): file_sha256(p) for p in (out / "draft-previous").iterdir()}}
    for training in ("draft-training", "draft-previous-training", "eagle3-training"):
        (out / training / "0").mkdir(parents=True)
        (out / training / "0" / "val_metrics.json").write_text('{"loss_epoch": 1.0}')
        (out / training / "train_command.txt").write_text("hfrelease demo build --seed 0\n")
    publish_vendor_repos(out, stamp_files=files)
    hub = tmp_path / "demo-hub"
    shutil.copytree(out / "hub", hub)

    previous = list(make_previous_release(_family(tmp_path / "v0", read_pins(out), out), hub_root=hub, build_dir=out))
    assert any("0.0" in line for line in previous)
    assert previous[-2:] == [line for line in previous if line.split(":")[0] in read_pins(out)]
    assert _main_weights(hub, DRAFT_REPO) == files["draft-previous/model.safetensors"]

    family = tmp_path / "v1"  # a working copy as cloned: pinning edits its text
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    lines = list(pin_working_copy(family, build_dir=out, hub_root=hub))
    target = family / "release.toml"
    assert lines[0].startswith("pinned ") and lines[0].endswith(f" in {target}")
    assert "copied the draft's training provenance draft-training/train_command.txt" in lines
    assert "copied the EAGLE-3 head's training provenance eagle3-training/train_command.txt" in lines
    assert (family / "eagle3-training" / "0" / "val_metrics.json").is_file()
    assert f"{DRAFT_REPO}: main holds draft " in "\n".join(lines[-2:])
    assert _main_weights(hub, DRAFT_REPO) == files["draft/model.safetensors"]


def test_pin_reads_the_builds_pins_before_touching_the_manifest(tmp_path: Path) -> None:
    """A build without recorded pins stops `demo pin` (exit 9) before its manifest is changed."""
    family = tmp_path / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    before = (family / "release.toml").read_bytes()
    from hfrelease.demo.versions import pin_working_copy

    with pytest.raises(EnvironmentProblem, match="vendor repos"):
        list(pin_working_copy(family, build_dir=tmp_path / "no-build"))
    assert (family / "release.toml").read_bytes() == before
