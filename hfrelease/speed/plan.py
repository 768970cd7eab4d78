"""What the speed anchors will do, as data: one server per (artifact, speculative config), its points.

A point is one workload at one concurrency under one config, on one artifact; each is one ledger
record. Every workload that needs a given (artifact, config) runs on the one server started for it,
one after the other, without a restart. Planning starts nothing: `--dry-run` prints the plan, and a
warm re-run whose every point is recorded for the same inputs starts no server at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hfrelease.errors import ArtifactError, HubError
from hfrelease.files.hashing import ContentHash, HashCache, hash_artifact
from hfrelease.files.sources import artifact_content
from hfrelease.ledger.record import LedgerRecord, input_key
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Artifact, Manifest, Speculative, Workload
from hfrelease.manifest.input_files import read_workload_prompts
from hfrelease.manifest.selection import select
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.speed import bench

NONE = "none"
SWEEP_PROTOCOL = 1  # how a context sweep's prompts are made (`hfrelease.speed.context`): bumped when that changes
# Workload fields that decide what is measured; label, description and the lists that fan a workload
# out into points (artifacts, speculative, concurrency) are not: each point carries its own.
_MEASURED_FIELDS = {"prompts", "output_len", "thinking", "repeats", "warmups", "num_prompts"}


@dataclass(frozen=True, kw_only=True)
class PointJob:
    """One workload at one concurrency on a server; `recorded` is a matching "ok" record (not re-run)."""

    workload: Workload
    concurrency: int
    num_prompts: int
    prompts_sha256: str
    input_key: str
    recorded: LedgerRecord | None
    # A point of the workload's context-length sweep (`input_lens`): its prompts cut to this many tokens.
    input_len: int | None = None

    @property
    def pending(self) -> bool:
        return self.recorded is None

    @property
    def label(self) -> str:
        return f"{self.workload.id} c{self.concurrency}" + (f" in{self.input_len}" if self.input_len else "")


@dataclass(frozen=True, kw_only=True)
class SpeedServerJob:
    """One artifact served under one speculative config (or none), and the points measured on it."""

    artifact: Artifact
    model_dir: Path | None
    content: ContentHash | None
    speculative: Speculative | None
    draft: Artifact | None
    draft_dir: Path | None
    draft_content: ContentHash | None
    public: ServeCommand  # the form a card prints (repo ids, no host/port)
    points: tuple[PointJob, ...]
    unknown: str | None = None  # why the artifact's or draft's content is None (a Hub that could not say)

    @property
    def spec_id(self) -> str:
        return self.speculative.id if self.speculative else NONE

    @property
    def label(self) -> str:
        return f"{self.artifact.id} [{self.spec_id}]"

    @property
    def pending(self) -> tuple[PointJob, ...]:
        return tuple(p for p in self.points if p.pending)


@dataclass(frozen=True, kw_only=True)
class SpeedPlan:
    manifest: Manifest
    servers: tuple[SpeedServerJob, ...]

    @property
    def pending(self) -> int:
        return sum(len(s.pending) for s in self.servers)


def workload_artifacts(manifest: Manifest, workload: Workload) -> list[str]:
    """The artifacts a workload is measured on: those it names, else every artifact that is not a draft."""
    if workload.artifacts is not None:
        return list(workload.artifacts)
    return [a.id for a in manifest.artifact if a.kind != "draft"]


def quant_companions(manifest: Manifest, workload: Workload) -> list[str]:
    """The quants measured beside the reference on `workload` though it does not list them (`compare_quants`):
    without speculation, at its lowest concurrency, so each quant's card can state its decode speedup over
    the reference on the reference's own workloads (the seed cards' "+60 % batch-1 decode vs bf16")."""
    measured = workload_artifacts(manifest, workload)
    if not workload.compare_quants or NONE not in workload.speculative or manifest.reference.id not in measured:
        return []
    return [a.id for a in manifest.artifact if a.kind == "quant" and a.id not in measured]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def count_prompts(path: Path) -> int:
    return sum(1 for line in read_workload_prompts(path).splitlines() if line.strip())


def point_input_key(
    workload: Workload, *, concurrency: int, prompts_sha256: str, content_sha256: str,
    draft_sha256: str | None, speculative: Speculative | None, public: ServeCommand, vllm_version: str | None,
    input_len: int | None = None,
) -> str:
    """The key a point is recorded under: a change to any of these re-measures it. `input_len` (a context
    sweep's point) joins it only when set, so the workload's own points keep their keys."""
    return input_key(
        **({"input_len": input_len, "sweep_protocol": SWEEP_PROTOCOL} if input_len else {}),
        artifact=content_sha256,
        draft=draft_sha256,
        # `ignore_eos` joins the key only when set, so records measured before the option existed stay
        # valid (their workloads stopped at EOS, as one without it still does).
        workload=workload.model_dump(mode="json", include=_MEASURED_FIELDS | _set_fields(workload)),
        concurrency=concurrency,
        prompts=prompts_sha256,
        # The gate threshold is not a measured input: changing it re-judges the points, never re-measures them.
        speculative=speculative.model_dump(mode="json", exclude={"min_acceptance_vs_reference"})
        if speculative else None,
        serve=public.identity(),
        harness={"vllm": vllm_version, "bench_protocol": bench.PROTOCOL},
    )


def _set_fields(workload: Workload) -> set[str]:
    # `ignore_eos` and the sampling settings join the key only when they leave their defaults, so records
    # measured before the options existed stay valid (their workloads stopped at EOS and were greedy, as one
    # without them still is).
    return ({"ignore_eos"} if workload.ignore_eos else set()) | ({"temperature"} if workload.temperature else set()) | (
        {"top_p"} if workload.top_p is not None else set())


def _matrix_points(
    manifest: Manifest, workload: Workload, selected: Sequence[str],
    content_of: Callable[[Artifact], tuple[Path | None, ContentHash | None]],
) -> list[tuple[str, str]]:
    """The (artifact, config) servers the draft x target matrix adds to `workload`: each config of a draft with
    `matrix = true` that the workload serves with the draft's trained target, on every other compatible
    artifact (`hfrelease.speed.matrix`), beside that artifact without speculation when the workload has it."""
    from hfrelease.speed.matrix import matrix_targets

    listed = workload_artifacts(manifest, workload)
    added: list[tuple[str, str]] = []
    for spec_id in workload.speculative:
        spec = _speculative(manifest, spec_id)
        draft = manifest.artifact_by_id(spec.draft) if spec and spec.draft else None
        if draft is None or draft.draft is None or not draft.draft.matrix or draft.draft.target not in listed:
            continue
        directories = {a.id: _local_files(a, content_of(a)[0]) for a in manifest.artifact
                       if a.kind != "draft" or a.id == draft.id}
        named = draft.draft.matrix if isinstance(draft.draft.matrix, list) else None
        for target in matrix_targets(manifest, draft, directories).compatible:
            if target in listed or (named is not None and target not in named) or (
                    selected and target not in selected and draft.id not in selected):
                continue
            added += [(target, NONE)] if NONE in workload.speculative else []
            added.append((target, spec_id))
    return list(dict.fromkeys(added))


def _local_files(artifact: Artifact, model_dir: Path | None) -> Path | None:
    """An artifact's files on this machine: its directory, or a Hub source's pinned snapshot when the Hub cache
    already holds it (a dry run downloads nothing, yet plans what the run will: the run downloads there)."""
    if model_dir is not None or artifact.source.hub is None:
        return model_dir
    from hfrelease.evaluation.plan import ModelFiles

    cached = Path(ModelFiles(name=artifact.source.hub, revision=artifact.source.revision).local_dir)
    return cached if cached.is_dir() else None


def _speculative(manifest: Manifest, spec_id: str) -> Speculative | None:
    if spec_id == NONE:
        return None
    return next(s for s in manifest.speculative if s.id == spec_id)


def plan_speed(
    manifest: Manifest,
    *,
    ledger: Ledger,
    hash_cache: HashCache | None,
    artifacts: Sequence[str] = (),
    workloads: Sequence[str] = (),
    force: bool = False,
    download: bool = True,
    hasher: Callable[..., ContentHash] = hash_artifact,
    leave_drafts: bool = False,
) -> SpeedPlan:
    """Which servers to start and which points to measure on each; recorded points are found by input key.

    `artifacts` selects by served artifact or by draft artifact (naming a draft measures the configs
    that use it). `leave_drafts` leaves out every config served with a draft artifact (and the draft x target
    matrix): the release's jobs measure those in each draft's own job (`hfrelease.speed.drafts`).
    """
    from hfrelease.ledger.provenance import versions

    select(manifest, artifacts=artifacts, workloads=workloads)
    vllm_version = versions().get("vllm")
    contents: dict[str, tuple[Path | None, ContentHash | None]] = {}
    unknown: dict[str, str] = {}

    def content_of(artifact: Artifact) -> tuple[Path | None, ContentHash | None]:
        if artifact.id not in contents:
            # A Hub source is hashed through the cache's links when downloaded, else identified from the
            # Hub (hfrelease.files.sources); when the Hub cannot say (offline dry run) its points stay unkeyed.
            try:
                contents[artifact.id] = artifact_content(manifest, artifact, download=download, cache=hash_cache,
                                                         hasher=hasher)
            except (ArtifactError, HubError) as exc:
                if download or artifact.source.hub is None:
                    raise
                contents[artifact.id] = (None, None)
                unknown[artifact.id] = exc.message
        return contents[artifact.id]

    # (artifact id, spec id) -> [(workload, concurrency)], in manifest order: servers start in the order
    # their first workload appears, "none" before the configs it is compared with.
    wanted: dict[tuple[str, str], list[tuple[Workload, int, int | None]]] = {}
    for workload in manifest.workload:
        if workloads and workload.id not in workloads:
            continue
        for artifact_id in workload_artifacts(manifest, workload):
            chosen = []
            for spec_id in workload.speculative:
                spec = _speculative(manifest, spec_id)
                draft_id = spec.draft if spec else None
                if leave_drafts and draft_id is not None:
                    continue
                if not artifacts or artifact_id in artifacts or draft_id in artifacts:
                    chosen.append(spec_id)
            if chosen and NONE in workload.speculative and NONE not in chosen:
                # A draft selected alone is still compared with no speculation: its speedup gate needs it.
                chosen.insert(0, NONE)
            for spec_id in chosen:
                for concurrency in workload.concurrency:
                    wanted.setdefault((artifact_id, spec_id), []).append((workload, concurrency, None))
                # The context-length sweep, at concurrency 1 (a synchronous sweep, as the seeds' is).
                for length in workload.input_lens or []:
                    wanted.setdefault((artifact_id, spec_id), []).append((workload, 1, length))
        for artifact_id in quant_companions(manifest, workload):
            if not artifacts or artifact_id in artifacts:
                wanted.setdefault((artifact_id, NONE), []).append((workload, min(workload.concurrency), None))
        # The draft x target matrix compares targets at the workload's lowest concurrency (batch-1 where it has it).
        for artifact_id, spec_id in [] if leave_drafts else _matrix_points(manifest, workload, artifacts, content_of):
            wanted.setdefault((artifact_id, spec_id), []).append((workload, min(workload.concurrency), None))
    # A point wanted twice (a matrix target that another rule measures too) is measured once.
    wanted = {key: list({(w.id, c, n): (w, c, n) for w, c, n in items}.values()) for key, items in wanted.items()}

    prompt_hashes: dict[str, tuple[str, int]] = {}
    servers: list[SpeedServerJob] = []
    for (artifact_id, spec_id), items in sorted(wanted.items(), key=lambda kv: kv[0][1] != NONE):
        artifact = manifest.artifact_by_id(artifact_id)
        spec = _speculative(manifest, spec_id)
        draft = manifest.artifact_by_id(spec.draft) if spec and spec.draft else None
        model_dir, content = content_of(artifact)
        draft_dir, draft_content = content_of(draft) if draft else (None, None)
        public = build_serve_command(manifest, artifact, model=artifact.repo, speculative=spec,
                                     draft_model=draft.repo if draft else None)
        points: list[PointJob] = []
        for workload, concurrency, input_len in items:
            if workload.prompts not in prompt_hashes:
                path = manifest.resolve(workload.prompts)
                prompt_hashes[workload.prompts] = (file_sha256(path), count_prompts(path))
            prompts_sha, available = prompt_hashes[workload.prompts]
            ready = content is not None and (draft is None or draft_content is not None)
            key = point_input_key(
                workload, concurrency=concurrency, prompts_sha256=prompts_sha,
                content_sha256=content.sha256 if content else "",
                draft_sha256=draft_content.sha256 if draft_content else None, speculative=spec, public=public,
                vllm_version=vllm_version, input_len=input_len,
            ) if ready else ""
            recorded = None if force or not ready else ledger.latest(key)
            points.append(PointJob(workload=workload, concurrency=concurrency,
                                   num_prompts=workload.num_prompts or available, prompts_sha256=prompts_sha,
                                   input_key=key, recorded=recorded, input_len=input_len))
        why = [unknown[a.id] for a in (artifact, draft) if a is not None and a.id in unknown]
        servers.append(SpeedServerJob(artifact=artifact, model_dir=model_dir, content=content, speculative=spec,
                                      draft=draft, draft_dir=draft_dir, draft_content=draft_content, public=public,
                                      points=tuple(points), unknown="; ".join(why) or None))
    # Servers of one artifact next to each other: the order a person would run them in.
    order = {a.id: i for i, a in enumerate(manifest.artifact)}
    servers.sort(key=lambda s: (order[s.artifact.id], s.spec_id != NONE))
    return SpeedPlan(manifest=manifest, servers=tuple(servers))
