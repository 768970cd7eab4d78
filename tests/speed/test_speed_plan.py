"""Planning the speed anchors: one server per (artifact, config), points found in the ledger by input key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import ConfigError, UsageError
from hfrelease.files.hashing import ContentHash, FileHash
from hfrelease.ledger.record import LedgerRecord, Metric, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.speed.plan import SpeedPlan, plan_speed

pytestmark = pytest.mark.unit


def _hasher(directory: Path, **_: Any) -> ContentHash:
    """A content hash per directory name: the fixture checkpoints hold no weights."""
    import hashlib

    sha = hashlib.sha256(directory.name.encode()).hexdigest()
    return ContentHash(sha256=sha, files=(FileHash(path="model.safetensors", size=1, sha256=sha),), bytes_read=0)


def _plan(manifest: Manifest, ledger: Ledger, **kwargs: Any) -> SpeedPlan:
    return plan_speed(manifest, ledger=ledger, hash_cache=None, hasher=_hasher, **kwargs)


def _record(plan: SpeedPlan, server: int, point: int) -> LedgerRecord:
    job = plan.servers[server]
    p = job.points[point]
    assert job.content is not None
    return LedgerRecord(
        kind="speed", family=plan.manifest.family.name, artifact_id=job.artifact.id,
        artifact_hash=job.content.sha256, artifact_files=job.content.files,
        draft_artifact_id=job.draft.id if job.draft else None,
        draft_hash=job.draft_content.sha256 if job.draft_content else None, subject_id=p.workload.id,
        harness="vllm-bench", task=p.workload.prompts, task_hash=p.prompts_sha256, mode="non-thinking", n=2,
        seed=0, generation={}, metrics={"output_throughput": Metric(value=10.0)}, truncated=0, empty=0,
        serve=ServeRecord(argv=("vllm", "serve"), env={}, display="vllm serve"), versions={}, hardware={},
        started_at="2026-01-01T00:00:00Z", duration_s=1.0, input_key=p.input_key,
        extra={"speculative": job.spec_id, "concurrency": p.concurrency, "repeats": 3, "spread": {}, "failed": 0,
               "raw": []},
    )


def test_one_server_per_artifact_and_config(fixture_family: Path) -> None:
    """Every non-draft artifact gets a server per config, no speculation first; each holds every concurrency."""
    manifest = load_manifest(fixture_family)
    plan = _plan(manifest, Ledger(fixture_family / "results"))
    labels = [job.label for job in plan.servers]
    assert labels == ["ref [none]", "ref [ngram]", "ref [draft]", "fp8 [none]", "fp8 [ngram]", "fp8 [draft]"]
    assert all([p.concurrency for p in job.points] == [1, 2] for job in plan.servers)
    draft_job = plan.servers[2]
    assert draft_job.draft is not None and draft_job.draft.id == "draft" and draft_job.draft_content is not None
    assert "--speculative-config" in draft_job.public.argv
    assert plan.pending == 12
    assert plan.servers[0].points[0].num_prompts == sum(
        1 for line in (fixture_family / "prompts" / "chat.jsonl").read_text().splitlines() if line.strip())


def test_recorded_points_are_not_pending(fixture_family: Path) -> None:
    """A point whose input key is in the ledger is not re-measured; a server with none pending starts not."""
    manifest = load_manifest(fixture_family)
    ledger = Ledger(fixture_family / "results")
    plan = _plan(manifest, ledger)
    for index in range(2):
        ledger.write(_record(plan, 0, index))
    again = _plan(manifest, ledger)
    assert not again.servers[0].pending and again.pending == 10
    assert again.servers[0].points[0].recorded is not None
    assert _plan(manifest, ledger, force=True).pending == 12


def test_input_key_follows_what_is_measured(fixture_family: Path) -> None:
    """Output length, prompts and concurrency change the key; a workload's label does not."""
    base = load_manifest(fixture_family)
    ledger = Ledger(fixture_family / "results")
    keys = [p.input_key for job in _plan(base, ledger).servers for p in job.points]
    assert len(set(keys)) == len(keys)

    def with_workload(**changes: Any) -> list[str]:
        workload = base.workload[0].model_copy(update=changes)
        manifest = base.model_copy(update={"workload": [workload]})
        manifest._root = base.root
        return [p.input_key for job in _plan(manifest, ledger).servers for p in job.points]

    assert with_workload(label="Chat, renamed") == keys
    assert with_workload(output_len=64) != keys
    assert with_workload(repeats=5)[0] != keys[0]
    # ignore_eos left at its default keeps the keys records had before the option existed; set, it is
    # another measurement.
    assert with_workload(ignore_eos=False) == keys
    assert with_workload(ignore_eos=True)[0] != keys[0]
    (fixture_family / "prompts" / "chat.jsonl").write_text('{"prompt": "changed"}\n')
    assert with_workload()[0] != keys[0]


def test_selecting_a_draft_keeps_its_baseline(fixture_family: Path) -> None:
    """--artifact DRAFT measures the configs that use it and, for its speedup, the same points without."""
    plan = _plan(load_manifest(fixture_family), Ledger(fixture_family / "results"), artifacts=["draft"])
    assert [job.label for job in plan.servers] == ["ref [none]", "ref [draft]", "fp8 [none]", "fp8 [draft]"]
    only = _plan(load_manifest(fixture_family), Ledger(fixture_family / "results"), artifacts=["fp8"],
                 workloads=["chat"])
    assert [job.label for job in only.servers] == ["fp8 [none]", "fp8 [ngram]", "fp8 [draft]"]


def _reference_only(base: Manifest, **changes: Any) -> Manifest:
    """The fixture family with its workload measured on the reference alone (as the demo's are)."""
    workload = base.workload[0].model_copy(update={"artifacts": ["ref"], **changes})
    manifest = base.model_copy(update={"workload": [workload]})
    manifest._root = base.root
    return manifest


def test_quants_join_the_reference_workloads_without_speculation(fixture_family: Path) -> None:
    """A workload on the reference alone also measures every quant without speculation at its lowest
    concurrency, keyed like the quant's own points; compare_quants = false, or a selection, leaves them out."""
    base = load_manifest(fixture_family)
    ledger = Ledger(fixture_family / "results")
    plan = _plan(_reference_only(base), ledger)
    assert [job.label for job in plan.servers] == ["ref [none]", "ref [ngram]", "ref [draft]", "fp8 [none]"]
    assert [p.concurrency for p in plan.servers[-1].points] == [1]
    # The same point as when the workload lists the quant itself: a record of either serves both.
    listed = _plan(base, ledger, artifacts=["fp8"])
    assert plan.servers[-1].points[0].input_key == listed.servers[0].points[0].input_key
    assert [j.label for j in _plan(_reference_only(base, compare_quants=False), ledger).servers] == [
        "ref [none]", "ref [ngram]", "ref [draft]"]
    assert [j.label for j in _plan(_reference_only(base), ledger, artifacts=["fp8"]).servers] == ["fp8 [none]"]
    # A draft's job measures its target only (its no-speculation baseline), never the quants.
    assert [j.label for j in _plan(_reference_only(base), ledger, artifacts=["draft"]).servers] == [
        "ref [none]", "ref [draft]"]


def test_a_release_job_leaves_the_drafts_configs_to_the_drafts_job(fixture_family: Path) -> None:
    """`eval --artifact ID --speed --leave-drafts` (the release workflow's eval jobs, issue 27 part 3): the
    artifact's speed points without the configs served with a draft artifact, which its draft's own job
    measures; a draft named that way still runs its draft job."""
    from hfrelease.stages.eval import EvalSettings, _resolve

    base = _reference_only(load_manifest(fixture_family))
    ledger = Ledger(fixture_family / "results")
    assert [j.label for j in _plan(base, ledger, artifacts=["ref"], leave_drafts=True).servers] == [
        "ref [none]", "ref [ngram]"]
    assert [j.label for j in _plan(base, ledger, artifacts=["ref"]).servers] == [
        "ref [none]", "ref [ngram]", "ref [draft]"]
    manifest = fixture_family / "release.toml"
    job = _resolve(EvalSettings(manifest=manifest, artifacts=("draft",), speed=True, leave_drafts=True))
    assert job.drafts == ("draft",) and job.speed_only
    assert _resolve(EvalSettings(manifest=manifest, artifacts=("draft",), speed=True)).drafts == ()
    with pytest.raises(UsageError, match="--leave-drafts"):
        _resolve(EvalSettings(manifest=manifest, artifacts=("fp8",), leave_drafts=True))


def test_draft_job_never_measures_the_quants(fixture_family: Path) -> None:
    """The draft's release job (plan_drafts) serves its target with it and without speculation, nothing else."""
    from hfrelease.speed.drafts import draft_manifest

    base = _reference_only(load_manifest(fixture_family))
    # The fixture's draft targets the quant; the demo's targets the reference, whose workloads the quants join.
    artifacts = [a.model_copy(update={"draft": a.draft.model_copy(update={"target": "ref"})}) if a.draft else a
                 for a in base.artifact]
    retargeted = base.model_copy(update={"artifact": artifacts})
    retargeted._root = fixture_family
    manifest = draft_manifest(retargeted, "draft")
    manifest._root = fixture_family
    assert [j.label for j in _plan(manifest, Ledger(fixture_family / "results")).servers] == [
        "ref [none]", "ref [draft]"]


def test_unknown_selection_is_a_config_error(fixture_family: Path) -> None:
    """Unknown --artifact / --workload ids are reported together."""
    with pytest.raises(ConfigError) as raised:
        _plan(load_manifest(fixture_family), Ledger(fixture_family / "results"), artifacts=["nope"],
              workloads=["nada"])
    assert {p.location for p in raised.value.problems} == {"--artifact", "--workload"}


def test_gate_server_shared_only_when_it_is_the_same_command(fixture_family: Path, tmp_path: Path) -> None:
    """`eval --speed` hands the no-speculation job to a gate server only if that server runs its exact command
    (any port); a changed flag, env value or another artifact gets none, and a job is handed out once."""
    from dataclasses import replace

    from hfrelease.evaluation.plan import resolve_model_dir
    from hfrelease.serving.command import build_serve_command
    from hfrelease.speed.runner import SpeedSession

    manifest = load_manifest(fixture_family)
    ledger = Ledger(fixture_family / "results")
    plan = _plan(manifest, ledger)
    session = SpeedSession(plan, ledger=ledger, run_dir=tmp_path)
    # The gate server's command, as the eval runner builds it (its own model directory resolution).
    ref = manifest.artifact_by_id("ref")
    model_dir = resolve_model_dir(manifest, ref, download=False)
    gate_command = build_serve_command(manifest, ref, model=str(model_dir), host="127.0.0.1", port=43_210,
                                       vllm="/opt/venv/bin/vllm")
    job = session.shareable("ref", gate_command)
    assert job is not None and job.label == "ref [none]"
    assert session.shareable("fp8", gate_command) is None  # fp8's job is served with fp8's weights
    assert session.shareable("ref", replace(gate_command, argv=(*gate_command.argv, "--max-num-seqs", "2"))) is None
    assert session.shareable("ref", replace(gate_command, env={**gate_command.env, "VLLM_X": "1"})) is None
    session._done.add(job.label)  # measured on that gate server: not handed out again
    assert session.shareable("ref", gate_command) is None
