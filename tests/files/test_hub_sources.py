"""Hub-pinned sources (`source = { hub, revision }`) against the built-in Hub, through huggingface_hub's client.

The identity read from the Hub's listing (LFS sha256, no weight download) must equal the hash of the
downloaded snapshot, hashed through the cache's `snapshots/<rev>/f -> ../../blobs/..` links; the release's
gate decision must find a Hub-sourced reference's records without downloading it and without the vLLM
the records were measured with; a quant's eval job must see the reference's record.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from hfrelease.hub import HubServer
from tests.conftest import FIXTURES

# Weight bytes: binary, so the Hub stores them in LFS (and the default .gitattributes says so too).
REF_WEIGHTS = {"model-00001-of-00002.safetensors": os.urandom(3000),
               "model-00002-of-00002.safetensors": os.urandom(700)}
# A weight file kept in git itself (no LFS): the Hub gives only its blob sha1, so it is downloaded and hashed.
SMALL_WEIGHT = ("extra/tiny.safetensors", b"{}small weights kept in git\n")
NO_LFS = "*.json text\n"  # a .gitattributes without the safetensors rule


@pytest.fixture
def hub_client(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """huggingface_hub's default endpoint is the test Hub and a fresh cache (`hub_family` turns offline mode on)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    # What HF_ENDPOINT=<hub.url> sets when huggingface_hub is imported (both are read from it then).
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_TOKEN", "")
    return cache


def _upload(api: HfApi, repo: str, files: dict[str, bytes]) -> str:
    api.create_repo(repo, exist_ok=True)
    ops = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in files.items()]
    return api.create_commit(repo, operations=ops, commit_message="weights").oid


@pytest.fixture
def hub_family(api: HfApi, hub_client: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The fixture family whose reference is pinned on the Hub (weights in LFS and one in git); fp8 is local.

    Once uploaded, offline mode is turned on, as in CI (scripts/offline.sh): only the built-in Hub answers.
    """
    from huggingface_hub import constants

    family = tmp_path / "family"
    shutil.copytree(FIXTURES / "family", family)
    shutil.rmtree(family / "checkpoints" / "ref")
    (family / "checkpoints" / "fp8" / "model.safetensors").write_bytes(os.urandom(900))
    lfs_rule = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    _upload(api, "upstream/Fixture-1M",
            {**REF_WEIGHTS, "config.json": b"{}", ".gitattributes": NO_LFS.encode() + lfs_rule})
    # The small weight in a second commit under a .gitattributes without the LFS rule: stored in git.
    api.create_commit("upstream/Fixture-1M", commit_message="small", operations=[
        CommitOperationAdd(path_in_repo=".gitattributes", path_or_fileobj=NO_LFS.encode())])
    revision = _upload(api, "upstream/Fixture-1M", {SMALL_WEIGHT[0]: SMALL_WEIGHT[1]})
    toml = family / "release.toml"
    text = toml.read_text()
    assert 'source = { path = "checkpoints/ref" }' in text
    toml.write_text(text.replace('source = { path = "checkpoints/ref" }',
                                 f'source = {{ hub = "upstream/Fixture-1M", revision = "{revision}" }}'))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return family, revision


def _blobs(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("blobs/*") if p.is_file()]


def test_identity_from_hub_equals_identity_from_download(
    api: HfApi, hub_family: tuple[Path, str], hub_client: Path
) -> None:
    """LFS sha256 from the listing gives the hash of the downloaded snapshot, hashed through the cache's links."""
    from hfrelease.files.hashing import HashCache
    from hfrelease.files.sources import download_snapshot, hash_snapshot, hub_access, hub_content_hash

    _, revision = hub_family
    with hub_access():  # offline mode lifted for the loopback Hub only
        listing = {e.path: e for e in api.list_repo_tree("upstream/Fixture-1M", revision=revision, recursive=True)}
    assert listing[SMALL_WEIGHT[0]].lfs is None  # type: ignore[union-attr]
    assert all(listing[name].lfs is not None for name in REF_WEIGHTS)  # type: ignore[union-attr]

    from_hub = hub_content_hash("upstream/Fixture-1M", revision, cache=HashCache(hub_client.parent / "h.json"))
    # Only the git-stored weight was downloaded to identify the repo, never an LFS weight.
    assert from_hub.bytes_read == len(SMALL_WEIGHT[1])
    assert sorted(b.stat().st_size for b in _blobs(hub_client)) == [len(SMALL_WEIGHT[1])]

    snapshot = download_snapshot("upstream/Fixture-1M", revision)
    assert (snapshot / "model-00001-of-00002.safetensors").is_symlink()  # the cache's layout, really linked
    local = hash_snapshot(snapshot, cache=None)
    assert local == type(local)(sha256=from_hub.sha256, files=from_hub.files, bytes_read=local.bytes_read)
    lines = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n"
                    for name, data in sorted([*REF_WEIGHTS.items(), SMALL_WEIGHT]))
    assert from_hub.sha256 == hashlib.sha256(lines.encode()).hexdigest()


def test_eval_plan_hashes_a_hub_snapshot_through_the_cache_links(hub_family: tuple[Path, str]) -> None:
    """`eval` of a Hub source downloads it once and hashes it through `snapshots/<rev>/f -> ../../blobs/`."""
    from hfrelease.evaluation.plan import plan_eval
    from hfrelease.files.sources import hub_content_hash
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest

    family, revision = hub_family
    manifest = load_manifest(family)
    plan = plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref"])
    (job,) = plan.servers
    assert job.model_dir is not None and job.model_dir.name == revision
    assert job.content is not None
    assert job.content.sha256 == hub_content_hash("upstream/Fixture-1M", revision).sha256
    # Planning without download: the same identity, nothing downloaded.
    dry = plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref"], download=False)
    assert dry.servers[0].model_dir is None
    assert dry.servers[0].content is not None and dry.servers[0].content.sha256 == job.content.sha256
    assert dry.servers[0].gates[0].input_key == job.gates[0].input_key


def _record(manifest: object, artifact_id: str, gate: object, *, content_sha256: str, vllm: str,
            scores: list[float]) -> object:
    """A gate record keyed exactly as `hfrelease eval` keys one measured with `vllm` (not the one installed)."""
    from hfrelease.evaluation.plan import gate_input_key
    from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord
    from hfrelease.manifest import Gate, Manifest
    from hfrelease.serving.command import build_serve_command

    assert isinstance(manifest, Manifest) and isinstance(gate, Gate)
    artifact = manifest.artifact_by_id(artifact_id)
    public = build_serve_command(manifest, artifact, model=artifact.repo)
    versions = {"python": "3.11.9", "vllm": vllm, "lm_eval": "0.4.13", "hfrelease": "0.1.0"}
    key = gate_input_key(manifest, gate, content_sha256=content_sha256, public=public,
                         harness={"vllm": vllm, "lm_eval": "0.4.13"})
    value = sum(scores) / len(scores)
    return LedgerRecord(
        kind="gate", family=manifest.family.name, artifact_id=artifact_id, artifact_hash=content_sha256,
        artifact_files=(), subject_id=gate.id, harness="lm-eval" if gate.task else "custom",
        task=gate.task or gate.id, task_hash="0" * 64, mode=gate.mode, n=len(scores), seed=gate.seed,
        generation={"max_tokens": gate.max_tokens}, metrics={gate.metric: Metric(value=value, stderr=0.01)},
        samples=tuple(Sample(doc_id=str(i), score=s, truncated=False, empty=False) for i, s in enumerate(scores)),
        truncated=0, empty=0, serve=ServeRecord(argv=public.argv, env={}, display=public.display()),
        versions=versions, hardware={"cpu_count": 2}, started_at="2026-07-20T09:00:00Z", duration_s=1.0,
        input_key=key, extra={"metric": gate.metric, "value": value},
    )


def _write_records(family: Path, *, vllm: str) -> None:
    from hfrelease.files.hashing import hash_artifact
    from hfrelease.files.sources import hub_content_hash
    from hfrelease.ledger.record import LedgerRecord
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest

    manifest = load_manifest(family)
    ref = manifest.artifact_by_id("ref").source
    assert ref.hub is not None and ref.revision is not None
    contents = {"ref": hub_content_hash(ref.hub, ref.revision).sha256,
                "fp8": hash_artifact(family / "checkpoints" / "fp8").sha256}
    ledger = Ledger(family / "results")
    scores = [1.0] * 8 + [0.0] * 2
    for gate in manifest.gate:
        for artifact_id, sha in contents.items():
            record = _record(manifest, artifact_id, gate, content_sha256=sha, vllm=vllm, scores=scores)
            assert isinstance(record, LedgerRecord)
            ledger.write(record)


def test_gate_decision_finds_a_hub_reference_without_downloading_or_vllm(
    hub_family: tuple[Path, str], hub_client: Path
) -> None:
    """The merge job's decision: records measured under another vLLM, a Hub-sourced reference, no download."""
    from hfrelease.evaluation.plan import installed_harness
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.publish.decision import decide_gates

    family, _ = hub_family
    measured_with = "0.25.1"
    assert installed_harness()["vllm"] != measured_with  # the judging machine's vLLM is another (or none)
    _write_records(family, vllm=measured_with)
    manifest = load_manifest(family)
    # The reference and the quant (the fixture's draft is judged from speed records, which it has none of).
    decision = decide_gates(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref", "fp8"])
    assert decision.blocking == () and decision.allowed == ()
    assert {(r.artifact_id, r.verdict) for r in decision.rows} == {("ref", "reference"), ("fp8", "pass")}
    # Identified from the listing: only the small git-stored weight was fetched, never an LFS weight.
    assert sorted(b.stat().st_size for b in _blobs(hub_client)) == [len(SMALL_WEIGHT[1])]


def test_quant_eval_job_sees_the_hub_reference(hub_family: tuple[Path, str]) -> None:
    """A quant's own eval job (which serves only the quant) compares it with the Hub reference's record."""
    from hfrelease.evaluation.judging import judge
    from hfrelease.evaluation.plan import installed_harness, plan_eval
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest

    family, _ = hub_family
    _write_records(family, vllm=installed_harness()["vllm"] or "none")
    manifest = load_manifest(family)
    ledger = Ledger(family / "results")
    plan = plan_eval(manifest, ledger=ledger, hash_cache=None, artifacts=["fp8"])
    rows = judge(plan, ledger=ledger, measured={}, hash_cache=None)
    assert rows and {r.verdict for r in rows} == {"pass"}


def test_offline_quant_job_identifies_the_hub_reference_from_its_cached_snapshot(
    hub_family: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no Hub to ask (HF_HUB_OFFLINE=1, huggingface.co's endpoint: the lent H200 of issue 30), a quant's
    eval job still finds the reference's records when the cache holds the pinned commit's snapshot; a commit
    the cache lacks stays unidentified (an error naming it), never guessed."""
    from huggingface_hub import constants

    from hfrelease.errors import ArtifactError
    from hfrelease.evaluation.judging import judge
    from hfrelease.evaluation.plan import installed_harness, plan_eval
    from hfrelease.files.sources import artifact_content, download_snapshot
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest

    family, revision = hub_family
    _write_records(family, vllm=installed_harness()["vllm"] or "none")
    download_snapshot("upstream/Fixture-1M", revision)  # the job that served the reference filled the cache
    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")  # offline: nothing answers
    manifest = load_manifest(family)
    ledger = Ledger(family / "results")
    plan = plan_eval(manifest, ledger=ledger, hash_cache=None, artifacts=["fp8"])
    rows = judge(plan, ledger=ledger, measured={}, hash_cache=None)
    assert rows and {r.verdict for r in rows} == {"pass"}

    other = manifest.reference.model_copy(
        update={"source": manifest.reference.source.model_copy(update={"revision": "0" * 40})}
    )
    with pytest.raises(ArtifactError, match="upstream/Fixture-1M@000000000000: cannot read it"):
        artifact_content(manifest, other, download=False, cache=None)


def test_a_failing_hub_is_the_hubs_failure_and_an_absent_commit_the_manifests(
    hub: HubServer, hub_family: tuple[Path, str]
) -> None:
    """Reading a pinned source: a Hub that answers 503 after retries is a Hub failure (exit 7, the same command
    later), a commit the repo does not hold is the manifest's mistake (exit 3, fix release.toml)."""
    from hfrelease.errors import ArtifactError, ExitCode, HubError
    from hfrelease.files.sources import artifact_content
    from hfrelease.hub.faults import FaultRule
    from hfrelease.manifest import load_manifest

    family, _ = hub_family
    manifest = load_manifest(family)
    absent = manifest.reference.model_copy(
        update={"source": manifest.reference.source.model_copy(update={"revision": "0" * 40})}
    )
    with pytest.raises(ArtifactError) as raised:
        artifact_content(manifest, absent, download=False, cache=None)
    assert raised.value.exit_code == ExitCode.CONFIG and not isinstance(raised.value, HubError)

    hub.faults.add(FaultRule(repo="upstream/Fixture-1M", status=503, times=None))
    with pytest.raises(HubError) as failed:
        artifact_content(manifest, manifest.reference, download=False, cache=None)
    assert failed.value.exit_code == ExitCode.PUBLISH_FAILED
    assert failed.value.message.startswith("upstream/Fixture-1M@") and "503" in failed.value.message
