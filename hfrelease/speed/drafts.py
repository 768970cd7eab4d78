"""A draft artifact's job in the release: what it measures, and how the release judges it afterwards.

A draft (an EAGLE-3 head, a small draft model) has no quality gate of its own: speculative decoding is
lossless, so what can be wrong with a draft is how much of its drafting its target accepts and whether
that makes the target faster. Its job (`hfrelease eval --artifact DRAFT`, the same command as every
other entry of the release's eval matrix) serves it with its target (`[artifact.draft].target`), in every
speculative config that names it, on every workload that lists such a config, beside the same workload
on the target without speculation when the workload lists "none": the baseline of `min_speedup` is
measured in the same job, on the same machine. Workloads that serve the draft with another artifact
are not this job's (the draft gates would fail their target check): they stay `eval --speed`'s.

The draft gates (`verdict.draft_checks`) are judged from the speed records, never recorded as verdicts:
in the job, and again by the merge job on the merged ledger (`judge_draft`), where a point not recorded
for the current inputs is a problem of its own, as a gate without a record is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from hfrelease.errors import ConfigError, ConfigProblem
from hfrelease.files.hashing import HashCache
from hfrelease.ledger.record import Kind, LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Artifact, Manifest
from hfrelease.speed.noise import host_noise
from hfrelease.speed.per_request import load_outcomes
from hfrelease.speed.plan import (
    NONE,
    PointJob,
    SpeedPlan,
    SpeedServerJob,
    plan_speed,
    point_input_key,
    workload_artifacts,
)
from hfrelease.speed.result import SpeedRow, row_from_record
from hfrelease.speed.verdict import DraftCheck, draft_checks, own_head_checks, with_speedups


def draft_ids(manifest: Manifest) -> list[str]:
    return [a.id for a in manifest.artifact if a.kind == "draft"]


def draft_manifest(manifest: Manifest, draft_id: str) -> Manifest:
    """`manifest` as the draft's job sees it: the workloads that serve the draft with its target, cut down
    to that target and to "none" plus the configs that use the draft (the fields that key a point are kept)."""
    draft = manifest.artifact_by_id(draft_id)
    assert draft.draft is not None
    target = draft.draft.target
    configs = {s.id for s in manifest.speculative if s.draft == draft_id}
    workloads = [
        w.model_copy(update={"artifacts": [target], "compare_quants": False,
                             "speculative": [s for s in w.speculative if s == NONE or s in configs]})
        for w in manifest.workload
        if configs & set(w.speculative) and target in workload_artifacts(manifest, w)
    ]
    return manifest.model_copy(update={"workload": workloads})


def unserved_problem(manifest: Manifest, draft: Artifact) -> ConfigProblem:
    """The problem of a draft that no workload serves with its target (its acceptance cannot be measured)."""
    assert draft.draft is not None
    return ConfigProblem(
        location=f"artifact.{draft.id}",
        message=(f"no workload serves the draft {draft.id!r} with its target {draft.draft.target!r}: its acceptance "
                 "cannot be measured. Add a [[speculative]] config with draft = "
                 f"{draft.id!r} to a workload measured on {draft.draft.target!r}"))


def plan_drafts(
    manifest: Manifest,
    drafts: Sequence[str],
    *,
    ledger: Ledger,
    hash_cache: HashCache | None,
    workloads: Sequence[str] = (),
    force: bool = False,
    download: bool = True,
) -> SpeedPlan:
    """The speed plan of the draft jobs of `drafts`: one server per (target, config), shared by drafts with
    the same target; a draft that no workload serves with its target is a `ConfigError` (exit 3)."""
    problems = [unserved_problem(manifest, manifest.artifact_by_id(d)) for d in drafts
                if not draft_manifest(manifest, d).workload]
    if problems:
        raise ConfigError("hfrelease eval", problems)
    servers: dict[str, SpeedServerJob] = {}
    for draft_id in drafts:
        plan = plan_speed(draft_manifest(manifest, draft_id), ledger=ledger, hash_cache=hash_cache,
                          workloads=workloads, force=force, download=download)
        for job in plan.servers:
            known = servers.get(job.label)
            if known is None:
                servers[job.label] = job
                continue
            # Two drafts of one target share its no-speculation server and its points.
            keys = {p.input_key for p in known.points}
            extra = tuple(p for p in job.points if p.input_key not in keys)
            servers[job.label] = replace(known, points=known.points + extra)
    order = {a.id: i for i, a in enumerate(manifest.artifact)}
    jobs = sorted(servers.values(), key=lambda s: (order[s.artifact.id], s.spec_id != NONE))
    return SpeedPlan(manifest=manifest, servers=tuple(jobs))


@dataclass(frozen=True, kw_only=True)
class DraftProblem:
    """A draft gate of one draft that did not pass: failed, void, or not recorded ("missing")."""

    draft_id: str
    check: str  # a DraftCheck.check, or the point that has no record
    kind: Literal["fail", "void", "missing"]
    text: str


@dataclass(frozen=True, kw_only=True)
class DraftJudgement:
    draft_id: str
    checks: tuple[DraftCheck, ...]
    problems: tuple[DraftProblem, ...]


def find_point_record(job: SpeedServerJob, point: PointJob, *, ledger: Ledger) -> LedgerRecord | None:
    """The newest record of `point` made with any vLLM (the merge job may have none installed), or None.

    As `evaluation.plan.find_gate_record` does for gates: each candidate's key is recomputed with the vLLM
    version it names, so every other input (weights, draft, prompts, workload, serve command) must match.
    A void record is returned when it is the newest.
    """
    if job.content is None or (job.draft is not None and job.draft_content is None):
        return None
    found: LedgerRecord | None = None
    keys: dict[str | None, str] = {}
    kind: Kind = "speed-sweep" if point.input_len else "speed"
    for record in ledger.records(artifact_id=job.artifact.id, subject_id=point.workload.id, kind=kind):
        if record.artifact_hash != job.content.sha256:
            continue
        version = record.versions.get("vllm")
        if version not in keys:
            keys[version] = point_input_key(
                point.workload, concurrency=point.concurrency, prompts_sha256=point.prompts_sha256,
                content_sha256=job.content.sha256,
                draft_sha256=job.draft_content.sha256 if job.draft_content else None,
                speculative=job.speculative, public=job.public, vllm_version=version, input_len=point.input_len)
        if record.input_key == keys[version] and (found is None or record.status == "ok" or found.status != "ok"):
            found = record  # oldest first: the newest wins, an ok record over a later void one
    return found


def judge_draft(manifest: Manifest, draft_id: str, *, ledger: Ledger, hash_cache: HashCache | None) -> DraftJudgement:
    """The draft gates of `draft_id` on `ledger` (the merged one): nothing is measured or downloaded here."""
    draft = manifest.artifact_by_id(draft_id)
    if not draft_manifest(manifest, draft_id).workload:
        problem = unserved_problem(manifest, draft)
        return DraftJudgement(draft_id=draft_id, checks=(), problems=(
            DraftProblem(draft_id=draft_id, check="target", kind="missing", text=f"{draft_id}: {problem.message}"),))
    plan = plan_drafts(manifest, [draft_id], ledger=ledger, hash_cache=hash_cache, download=False)
    problems: list[DraftProblem] = []
    rows: list[SpeedRow] = []
    records: list[LedgerRecord] = []
    for job in plan.servers:
        for point in job.points:
            if draft.draft is not None and job.artifact.id != draft.draft.target:
                # A draft x target matrix point on another target: the draft gates judge the trained target's
                # points (the speedup over every one of a workload: batch 1, concurrencies, context lengths).
                continue
            length = f" input {point.input_len}" if point.input_len else ""
            where = f"{point.workload.id} c{point.concurrency}{length} [{job.spec_id}] on {job.artifact.id}"
            record, missing = _recorded_point(job, point, ledger=ledger, where=where, owners=[draft_id])
            problems += missing
            if record is not None:
                records.append(record)
                rows.append(row_from_record(record, origin="recorded"))
    # Judged against the session noise of the host(s) the points ran on, from the ledger's A/A groups.
    noise = host_noise(ledger.records(), [r for r in records if r.status == "ok"])
    checks = [c for c in draft_checks(manifest, with_speedups(rows), noise) if c.draft_id == draft_id]
    problems += _failed(draft_id, checks)
    if not checks and not problems:
        problems.append(DraftProblem(
            draft_id=draft_id, check="acceptance", kind="missing",
            text=f"{draft_id}: no batch-1 point served with it: its acceptance was never measured"))
    return DraftJudgement(draft_id=draft_id, checks=tuple(checks), problems=tuple(problems))


def own_head_manifest(manifest: Manifest) -> Manifest:
    """`manifest` cut to the workloads that list a config gated against the reference's acceptance
    (`min_acceptance_vs_reference`: a head the artifact ships itself, as native MTP), each cut to those configs
    (the fields that key a point are kept)."""
    gated = {s.id for s in manifest.speculative if s.min_acceptance_vs_reference is not None}
    workloads = [w.model_copy(update={"compare_quants": False, "speculative": [s for s in w.speculative if s in gated]})
                 for w in manifest.workload if gated & set(w.speculative)]
    return manifest.model_copy(update={"workload": workloads})


def judge_own_heads(manifest: Manifest, artifacts: Sequence[str], *, ledger: Ledger,
                    hash_cache: HashCache | None) -> list[DraftJudgement]:
    """The gate of each head an artifact of `artifacts` ships itself, on `ledger` (the merged one): its batch-1
    points and the reference's beside them (`verdict.own_head_checks`), each of which must be recorded for the
    current inputs. One judgement per artifact judged (`draft_id` is the artifact); nothing is measured."""
    cut = own_head_manifest(manifest)
    if not cut.workload:
        return []
    reference = manifest.reference.id
    plan = plan_speed(cut, ledger=ledger, hash_cache=hash_cache, download=False)
    rows: list[SpeedRow] = []
    problems: dict[str, list[DraftProblem]] = {}
    served = {(job.artifact.id, point.workload.id, job.spec_id) for job in plan.servers for point in job.points}
    for job in plan.servers:
        for point in job.points:
            if point.concurrency != 1 or point.input_len:
                continue  # the gate's points (`verdict.own_head_checks`)
            where = f"{point.workload.id} c{point.concurrency} [{job.spec_id}] on {job.artifact.id}"
            # The reference's point is the bound of every artifact served the same way: its absence is theirs.
            owners = ([a for a in artifacts if a != reference and (a, point.workload.id, job.spec_id) in served]
                      if job.artifact.id == reference else [job.artifact.id])
            record, missing = _recorded_point(job, point, ledger=ledger, where=where, owners=owners)
            for problem in missing:
                problems.setdefault(problem.draft_id, []).append(problem)
            if record is not None:
                rows.append(row_from_record(record, origin="recorded"))
    checks = own_head_checks(manifest, rows)
    judged: list[DraftJudgement] = []
    for artifact_id in artifacts:
        mine = tuple(c for c in checks if c.draft_id == artifact_id)
        failed = _failed(artifact_id, mine)
        if mine or artifact_id in problems:
            judged.append(DraftJudgement(draft_id=artifact_id, checks=mine,
                                         problems=(*problems.get(artifact_id, []), *failed)))
    return judged


def _recorded_point(job: SpeedServerJob, point: PointJob, *, ledger: Ledger, where: str,
                    owners: Sequence[str]) -> tuple[LedgerRecord | None, list[DraftProblem]]:
    """The usable record of one planned point (its per-request file checked), or no record and a "missing" or
    "void" problem for each artifact whose gate needs the point (`owners`), named by `where`: what the draft
    gates and the own-head gate both judge a point by."""
    record = find_point_record(job, point, ledger=ledger)
    if record is not None and record.status != "void":
        load_outcomes(ledger, record)  # a missing or edited per-request file: LedgerError (exit 6)
        return record, []
    kind: Literal["void", "missing"] = "missing" if record is None else "void"
    if record is not None:
        why = f"void ({record.void_reason})"
    elif job.content is None or (job.draft is not None and job.draft_content is None):
        why = f"its content could not be identified ({job.unknown})"
    else:
        why = "no speed record for the current inputs (its eval job failed or did not run)"
    return None, [DraftProblem(draft_id=o, check=where, kind=kind, text=f"{o}: {where}: {why}") for o in owners]


def _failed(draft_id: str, checks: Sequence[DraftCheck]) -> list[DraftProblem]:
    """A "fail" problem for each failing check of `draft_id`, as the merge job lists what stops the release."""
    return [DraftProblem(draft_id=draft_id, check=c.check, kind="fail",
                         text=f"{draft_id}: {c.check} on {c.workload_id} [{c.speculative}]: fail ({c.reason})")
            for c in checks if c.verdict == "fail" and c.draft_id == draft_id]
