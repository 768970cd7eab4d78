"""What `hfrelease eval` will do, as data: one server per artifact, the gates to run on it, what is cached.

Planning never starts a server or sends a request: `--dry-run` prints the plan, and a warm re-run whose
every gate is already recorded for the same inputs finds nothing pending and starts nothing.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfrelease.errors import ArtifactError, HubError
from hfrelease.evaluation.budget import InFlight, Sweep, choose_in_flight, find_sweep
from hfrelease.evaluation.custom_gate import custom_gate_argv
from hfrelease.evaluation.lm_eval_command import LmEvalCall, lm_eval_call
from hfrelease.files.hashing import ContentHash, HashCache, hash_artifact
from hfrelease.files.sources import artifact_content
from hfrelease.ledger.record import LedgerRecord, input_key
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Artifact, Gate, Manifest
from hfrelease.manifest.selection import select
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.serving.emulation import with_emulation
from hfrelease.verdicts.seeds import seed_runs

# Gate fields that change how a measurement is judged, not what is measured: editing them re-judges the
# recorded samples instead of re-running the gate (request_timeout only bounds how long a request is awaited).
_JUDGEMENT_FIELDS = {"label", "description", "margin", "floor", "min_recovery", "higher_is_better", "max_truncated",
                     "artifacts", "num_concurrent", "request_timeout", "truncation_margin", "max_kl", "max_flip_rate"}
# Fields left out of the key while unset, so the keys of every other gate stay what they were before these
# fields existed (and their recorded results stay current): the fidelity gate's, and `seeds`, which a gate's
# runs never carry (each run is the gate with one `seed`, see `hfrelease.verdicts.seeds`).
_KEYED_WHEN_SET = {"fidelity", "top_k", "seeds"}


@dataclass(frozen=True, kw_only=True)
class GateJob:
    """One run of a gate on an artifact: a gate with `seeds` has one job per seed, each `gate` being that
    seed's run (`seed` set, no `seeds`; `hfrelease.verdicts.seeds.seed_runs`), recorded under its own key."""

    artifact_id: str
    gate: Gate
    input_key: str
    recorded: LedgerRecord | None  # a matching "ok" record: not re-run unless forced
    seeded: bool = False  # one of several seeds' runs (the manifest's gate has `seeds`)

    @property
    def label(self) -> str:
        """The gate's id, with the seed when it is one of several runs: how progress and dry runs name it."""
        return f"{self.gate.id} (seed {self.gate.seed})" if self.seeded else self.gate.id

    @property
    def pending(self) -> bool:
        return self.recorded is None


@dataclass(frozen=True, kw_only=True)
class ServerJob:
    """One artifact served once; every gate for it uses that server."""

    artifact: Artifact
    model_dir: Path | None  # local files; None when a Hub source is not downloaded (dry run, judging)
    content: ContentHash | None  # None only when a Hub source's identity could not be read (`unknown` says why)
    public: ServeCommand  # the form a card prints (repo id, no host/port)
    gates: tuple[GateJob, ...]
    unknown: str | None = None
    in_flight: InFlight | None = None  # the requests its gates keep in flight together (concurrent schedule)
    sweep: Sweep | None = None  # its recorded concurrency sweep: the server's throughput at each level

    @property
    def pending(self) -> tuple[GateJob, ...]:
        return tuple(g for g in self.gates if g.pending)

    @property
    def concurrent(self) -> bool:
        """Whether its gates run at once, sharing `in_flight` (else one after another at their num_concurrent)."""
        return self.in_flight is not None

    def num_concurrent(self, gate: Gate) -> int:
        """The requests `gate` may keep in flight: the shared budget, or its own num_concurrent."""
        return self.in_flight.value if self.in_flight is not None else gate.num_concurrent


@dataclass(frozen=True, kw_only=True)
class EvalPlan:
    manifest: Manifest
    servers: tuple[ServerJob, ...]

    @property
    def pending(self) -> int:
        return sum(len(s.pending) for s in self.servers)


def manifest_gate(manifest: Manifest, gate_id: str) -> Gate:
    """The manifest's gate `gate_id` (with its `seeds`, where a job's gate is one seed's run)."""
    return next(g for g in manifest.gate if g.id == gate_id)


def gate_artifacts(manifest: Manifest, gate: Gate) -> list[str]:
    """The artifacts a gate runs on: those it names, else every reference and quant artifact.

    A fidelity gate always runs on the reference too, first: its record holds the continuations and the
    reference's own scoring that every other artifact is compared with.
    """
    chosen = list(gate.artifacts) if gate.artifacts is not None else [a.id for a in manifest.artifact
                                                                        if a.kind != "draft"]
    if gate.is_fidelity:
        reference = manifest.reference.id
        chosen = [reference, *(a for a in chosen if a != reference)]
    return chosen


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def task_identity(manifest: Manifest, gate: Gate, *, harness: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """What identifies the task before it runs: its name, harness version, and local task files' content.

    `harness` gives the vLLM / lm-eval versions to key with (a record's own); default: those installed here.
    """
    identity: dict[str, Any] = {"task": gate.task, "command": gate.command, "entry_point": gate.entry_point}
    if gate.fidelity is not None:
        identity["fidelity"] = hashlib.sha256(manifest.resolve(gate.fidelity).read_bytes()).hexdigest()
    if gate.task is not None:
        identity["lm_eval"] = (harness if harness is not None else installed_harness()).get("lm_eval")
    if gate.task_dir:
        identity["task_dir"] = _tree_hash(manifest.resolve(gate.task_dir))
    for arg in gate.command or []:
        candidate = manifest.root / arg
        if not arg.startswith("-") and candidate.is_file():
            identity.setdefault("files", {})[arg] = hashlib.sha256(candidate.read_bytes()).hexdigest()
    return identity


def installed_harness() -> dict[str, str | None]:
    """The vLLM and lm-eval versions installed here (None for one that is not)."""
    from hfrelease.ledger.provenance import versions

    found = versions()
    return {"vllm": found.get("vllm"), "lm_eval": found.get("lm_eval")}


def gate_input_key(
    manifest: Manifest, gate: Gate, *, content_sha256: str, public: ServeCommand,
    harness: Mapping[str, str | None] | None = None, reference_sha256: str | None = None,
) -> str:
    """The key under which a gate's result is recorded: a change to any of these re-runs it.

    `harness` (vLLM and lm-eval versions) defaults to what is installed here: what a measurement made now
    would be made with. `reference_sha256`: the reference's content, which a fidelity gate's result on
    another artifact depends on (it scores the reference's continuations against the reference's logprobs).
    """
    found = harness if harness is not None else installed_harness()
    settings = gate.model_dump(mode="json", exclude=_JUDGEMENT_FIELDS)
    settings = {k: v for k, v in settings.items() if not (k in _KEYED_WHEN_SET and v is None)}
    extra = {"reference": reference_sha256} if reference_sha256 is not None else {}
    return input_key(
        artifact=content_sha256,
        gate=settings,
        task=task_identity(manifest, gate, harness=found),
        serve=public.identity(),
        harness={"vllm": found.get("vllm"), "lm_eval": found.get("lm_eval")},
        **extra,
    )


def fidelity_reference(manifest: Manifest, gate: Gate, artifact_id: str, reference_sha256: str | None) -> str | None:
    """The reference content a gate's key depends on: a fidelity gate's, on an artifact other than the reference."""
    if not gate.is_fidelity or artifact_id == manifest.reference.id:
        return None
    # Unidentified, the key matches no record: nothing stale is taken for current (and measuring needs the
    # reference's record, found by its content, so it reports the reference as missing).
    return reference_sha256 or "unknown"


def find_gate_record(
    manifest: Manifest, gate: Gate, *, ledger: Ledger, artifact_id: str, content_sha256: str, public: ServeCommand,
    any_harness: bool, reference_sha256: str | None = None,
) -> LedgerRecord | None:
    """The newest "ok" record of `gate` for these inputs, or None.

    Measuring (`any_harness=False`): the key includes the vLLM / lm-eval installed here, so a new harness
    re-measures. Judging and rendering (`any_harness=True`) run where no vLLM is installed (a release's merge
    and render jobs install hfrelease alone), so the harness versions are taken from each candidate record
    and every other input must still match: the record's own key is recomputed with its versions, and a
    record whose artifact, task, gate settings or serve command differ is never taken.
    """
    reference = fidelity_reference(manifest, gate, artifact_id, reference_sha256)
    if not any_harness:
        return ledger.latest(gate_input_key(manifest, gate, content_sha256=content_sha256, public=public,
                                            reference_sha256=reference))
    found: LedgerRecord | None = None
    keys: dict[tuple[str | None, str | None], str] = {}
    for record in ledger.records(artifact_id=artifact_id, subject_id=gate.id, kind="gate"):
        if record.status != "ok" or record.artifact_hash != content_sha256:
            continue
        harness = {"vllm": record.versions.get("vllm"), "lm_eval": record.versions.get("lm_eval")}
        pair = (harness["vllm"], harness["lm_eval"])
        if pair not in keys:
            keys[pair] = gate_input_key(manifest, gate, content_sha256=content_sha256, public=public, harness=harness,
                                        reference_sha256=reference)
        if record.input_key == keys[pair]:
            found = record  # records() is oldest first: the last match is the newest
    return found


def resolve_model_dir(manifest: Manifest, artifact: Artifact, *, download: bool) -> Path | None:
    """The artifact's local files: its path, or a Hub snapshot at the pinned revision (when allowed)."""
    if artifact.source.path is not None:
        return manifest.resolve(artifact.source.path)
    if not download:
        return None
    from hfrelease.files.sources import download_snapshot

    assert artifact.source.hub is not None and artifact.source.revision is not None
    return download_snapshot(artifact.source.hub, artifact.source.revision)


@dataclass(frozen=True, kw_only=True)
class ModelFiles:
    """Where vLLM and the tokenizers read an artifact from: its local directory, or (in a dry run, before a
    Hub source is downloaded) its Hub repo id at the pinned commit, which `vllm serve --revision` and
    lm-eval's `revision` fetch exactly as the run's download does."""

    name: str
    revision: str | None = None

    @property
    def local_dir(self) -> str:
        """A directory for tools that take no revision (`vllm bench serve --tokenizer`): the local one, or
        the Hub cache's snapshot of the pinned commit, where the download (or `vllm serve --revision`) puts it."""
        if self.revision is None:
            return self.name
        from huggingface_hub import constants
        from huggingface_hub.file_download import repo_folder_name

        folder = repo_folder_name(repo_id=self.name, repo_type="model")
        return str(Path(constants.HF_HUB_CACHE) / folder / "snapshots" / self.revision)


def model_files(artifact: Artifact, model_dir: Path | None) -> ModelFiles:
    """`model_dir` when the files are local (or downloaded), else the artifact's pinned Hub source."""
    if model_dir is not None:
        return ModelFiles(name=str(model_dir))
    assert artifact.source.hub is not None and artifact.source.revision is not None
    return ModelFiles(name=artifact.source.hub, revision=artifact.source.revision)


def serve_command(manifest: Manifest, job: ServerJob, *, port: int, vllm: str = "vllm") -> ServeCommand:
    """The `vllm serve` command of a gate server: what the runner starts and what --dry-run prints."""
    files = model_files(job.artifact, job.model_dir)
    command = build_serve_command(manifest, job.artifact, model=files.name, revision=files.revision,
                                  host="127.0.0.1", port=port, vllm=vllm)
    return with_emulation(command, job.artifact)


def plan_eval(
    manifest: Manifest,
    *,
    ledger: Ledger,
    hash_cache: HashCache | None,
    artifacts: Sequence[str] = (),
    gates: Sequence[str] = (),
    force: bool = False,
    download: bool = True,
    any_harness: bool = False,
    hasher: Callable[..., ContentHash] = hash_artifact,
    attached: bool = False,
) -> EvalPlan:
    """Which servers to start and which gates to run on each; recorded results are found by input key.

    `attached`: the run measures on a server it did not start (`--endpoint`), which serves one artifact; the
    reference is then never planned for a fidelity gate (its record must exist, else the gate says so).

    `download=False` never downloads a Hub source's weights: its identity comes from the Hub
    (`hfrelease.files.sources`), so recorded results are still found. `any_harness` finds records made with
    another vLLM / lm-eval than the one installed here (`find_gate_record`): for judging, not measuring.
    """
    select(manifest, artifacts=artifacts, gates=gates)
    servers: list[ServerJob] = []
    reference_sha = _reference_sha(manifest, hash_cache=hash_cache, hasher=hasher, gates=gates)
    for artifact in manifest.artifact:
        if artifact.kind == "draft" or (artifacts and artifact.id not in artifacts):
            continue
        chosen = [
            g for g in manifest.gate if artifact.id in gate_artifacts(manifest, g) and (not gates or g.id in gates)
        ]
        if not chosen:
            continue
        model_dir: Path | None = None
        content: ContentHash | None = None
        unknown = None
        try:
            model_dir, content = artifact_content(manifest, artifact, download=download, cache=hash_cache,
                                                  hasher=hasher)
        except (ArtifactError, HubError) as exc:
            if download or artifact.source.hub is None:
                raise
            # Not downloading and the Hub cannot say (offline, say): a dry run still prints the plan, and
            # a judge reports the gates as unrecorded with this reason.
            unknown = exc.message
        public = build_serve_command(manifest, artifact, model=artifact.repo)
        jobs = []
        for gate in (run for chosen_gate in chosen for run in seed_runs(chosen_gate)):
            reference = fidelity_reference(manifest, gate, artifact.id, reference_sha)
            key = gate_input_key(manifest, gate, content_sha256=content.sha256, public=public,
                                 reference_sha256=reference) if content else ""
            recorded = None if force or content is None else find_gate_record(
                manifest, gate, ledger=ledger, artifact_id=artifact.id, content_sha256=content.sha256,
                public=public, any_harness=any_harness, reference_sha256=reference_sha)
            jobs.append(GateJob(artifact_id=artifact.id, gate=gate, input_key=key, recorded=recorded,
                                seeded=manifest_gate(manifest, gate.id).seeds is not None))
        sweep = find_sweep(ledger, artifact_id=artifact.id, content_sha256=content.sha256,
                           serve_display=public.display()) if content else None
        in_flight = choose_in_flight(manifest, chosen, sweep) if manifest.eval.schedule == "concurrent" else None
        servers.append(ServerJob(artifact=artifact, model_dir=model_dir, content=content, public=public,
                                 gates=tuple(jobs), unknown=unknown, in_flight=in_flight, sweep=sweep))
    # Measuring (or its dry run), not judging: a judge reports a missing record, it never plans a server.
    if not any_harness and not attached and artifacts and manifest.reference.id not in artifacts:
        servers = _with_fidelity_reference(manifest, servers, ledger=ledger, hash_cache=hash_cache, hasher=hasher,
                                           force=force, download=download)
    return EvalPlan(manifest=manifest, servers=tuple(servers))


def _with_fidelity_reference(
    manifest: Manifest, servers: list[ServerJob], *, ledger: Ledger, hash_cache: HashCache | None,
    hasher: Callable[..., ContentHash], force: bool, download: bool,
) -> list[ServerJob]:
    """`servers`, preceded by the reference's server for the fidelity gates whose reference record is missing.

    An eval job of one artifact (a release's matrix job) measures its fidelity gates against the reference's
    record of them: when no such record exists for the reference's current content, the job serves the
    reference first, for those gates only, instead of recording a void result. Greedy continuations make
    the reference's runs in several jobs the same measurement.
    """
    wanted = {g.gate.id: g.gate for job in servers for g in job.pending if g.gate.is_fidelity}
    if not wanted:
        return servers
    reference = manifest.reference
    try:
        model_dir, content = artifact_content(manifest, reference, download=download, cache=hash_cache, hasher=hasher)
    except (ArtifactError, HubError):
        if download:
            raise
        return servers  # a dry run that cannot identify the reference shows the artifact's own jobs
    public = build_serve_command(manifest, reference, model=reference.repo)
    jobs = []
    for gate in wanted.values():
        recorded = None if force else find_gate_record(manifest, gate, ledger=ledger, artifact_id=reference.id,
                                                       content_sha256=content.sha256, public=public,
                                                       any_harness=False)
        if recorded is None:
            key = gate_input_key(manifest, gate, content_sha256=content.sha256, public=public)
            jobs.append(GateJob(artifact_id=reference.id, gate=gate, input_key=key, recorded=None))
    if not jobs:
        return servers
    sweep = find_sweep(ledger, artifact_id=reference.id, content_sha256=content.sha256,
                       serve_display=public.display())
    concurrent = manifest.eval.schedule == "concurrent"
    in_flight = choose_in_flight(manifest, [job.gate for job in jobs], sweep) if concurrent else None
    return [ServerJob(artifact=reference, model_dir=model_dir, content=content, public=public, gates=tuple(jobs),
                      in_flight=in_flight, sweep=sweep), *servers]


def _reference_sha(
    manifest: Manifest, *, hash_cache: HashCache | None, hasher: Callable[..., ContentHash], gates: Sequence[str],
) -> str | None:
    """The reference's content hash when a chosen fidelity gate needs it (identified without downloading:
    a Hub source from the Hub's listing); None when no fidelity gate is chosen or it cannot be identified
    (then the fidelity records of other artifacts are not found, and are measured or reported as missing)."""
    if not any(g.is_fidelity and (not gates or g.id in gates) for g in manifest.gate):
        return None
    try:
        _, content = artifact_content(manifest, manifest.reference, download=False, cache=hash_cache, hasher=hasher)
    except (ArtifactError, HubError):
        return None
    return content.sha256


def gate_call(manifest: Manifest, gate: Gate, *, base_url: str, model: str, files: ModelFiles,
              num_concurrent: int | None = None) -> LmEvalCall:
    """The lm-eval run of an lm-eval gate: what the runner passes to lm-eval and what --dry-run prints.

    `num_concurrent`: its requests in flight (`ServerJob.num_concurrent`); default the gate's own."""
    tokenizer = files if gate.api == "completions" else None
    return lm_eval_call(gate, base_url=base_url, model=model,
                        task_dir=manifest.resolve(gate.task_dir) if gate.task_dir else None,
                        tokenizer=tokenizer.name if tokenizer else None,
                        tokenizer_revision=tokenizer.revision if tokenizer else None,
                        num_concurrent=num_concurrent)


def describe_fidelity(manifest: Manifest, job: GateJob, *, base_url: str, model: str) -> str:
    """A fidelity gate's requests, built by the functions that send them (`fidelity_gate`), as shell lines."""
    import json

    from hfrelease.evaluation.fidelity_gate import continuation_request, scoring_request
    from hfrelease.manifest.gate_rules import read_prompt_set

    gate = job.gate
    assert gate.fidelity is not None
    path = manifest.resolve(gate.fidelity)
    prompts = read_prompt_set(path)
    url = shlex.quote(f"{base_url}/v1/completions")

    def curl(body: dict[str, Any]) -> str:
        return f"curl -s {url} -H 'Content-Type: application/json' -d {shlex.quote(json.dumps(body))}"

    tokens = "<prompt_token_ids + continuation_token_ids>"
    score = curl({**scoring_request(gate, model=model, token_ids=[]), "prompt": tokens})
    if job.artifact_id == manifest.reference.id:
        first = curl(continuation_request(gate, model=model, prompt=prompts[0][1]))
        return (f"# {len(prompts)} prompts of {path}: per prompt, the greedy continuation, then its scoring\n"
                f"{first}\n{score}")
    return (f"# the {len(prompts)} token sequences of the reference's record of gate {gate.id!r}, each scored:\n"
            f"{score}")


def describe_gate(manifest: Manifest, job: GateJob, *, base_url: str, model: str, files: ModelFiles,
                  run_dir: str = "<run dir>", num_concurrent: int | None = None) -> str:
    """The exact invocation of one gate, as a shell line."""
    gate = job.gate
    if gate.fidelity is not None:
        return describe_fidelity(manifest, job, base_url=base_url, model=model)
    if gate.task is not None:
        call = gate_call(manifest, gate, base_url=base_url, model=model, files=files, num_concurrent=num_concurrent)
        return call.display(output_path=str(Path(run_dir) / "lm-eval" / job.artifact_id / gate.id))
    argv = custom_gate_argv(gate, base_url=base_url, model=model, out=Path(run_dir) / "report.json")
    return f"(cd {shlex.quote(str(manifest.root))} && {shlex.join(argv)})"
