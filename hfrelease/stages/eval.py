"""The eval stage: gates (and with `speed`, the speed anchors) of a family, measured, recorded and judged.

`run_eval_stage(settings)` is what `hfrelease eval` runs and `plan_eval_stage(settings)` what its
`--dry-run` shows. A live view is fed through `EvalViews`: the stage opens one view for the gates and
one for the speed anchors, each around the work it shows (`eval_view.LiveViews` says what each shows; the
CLI only draws it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hfrelease.errors import ExitCode, UsageError
from hfrelease.files.cache import cache_dir, default_hash_cache
from hfrelease.stages.runner import run_stamp, stage_signals, worst

if TYPE_CHECKING:
    from hfrelease.evaluation.budget import PlannedSweep
    from hfrelease.evaluation.events import EvalEvents
    from hfrelease.evaluation.plan import EvalPlan, ServerJob
    from hfrelease.evaluation.runner import EvalReport
    from hfrelease.files.hashing import HashCache
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import Manifest
    from hfrelease.serving.command import ServeCommand
    from hfrelease.serving.process import VllmServer
    from hfrelease.speed.plan import SpeedPlan
    from hfrelease.speed.runner import SpeedEvents, SpeedReport, SpeedSession


@dataclass(frozen=True, kw_only=True)
class EvalSettings:
    """What `hfrelease eval` was asked to do (its options, parsed)."""

    manifest: Path
    artifacts: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    endpoint: str | None = None  # attach to this running server instead of starting one
    force: bool = False
    speed: bool = False
    speed_only: bool = False
    # The release's eval jobs: configs served with a draft artifact are left to that draft's own job, and a
    # draft named runs its draft job even with `speed` (one command for every entry of the matrix).
    leave_drafts: bool = False
    run_dir: Path | None = None  # default: runs/<family>-<stamp>


class EvalViews(Protocol):
    """Where a live view hooks in: each method returns a context that is open while that part runs."""

    def gates(self, plan: EvalPlan, run_dir: Path) -> AbstractContextManager[EvalEvents]: ...
    def speed(self, plan: SpeedPlan, run_dir: Path) -> AbstractContextManager[SpeedEvents]: ...


class NoViews:
    """No live view: events are dropped."""

    @contextlib.contextmanager
    def gates(self, plan: EvalPlan, run_dir: Path) -> Iterator[EvalEvents]:
        from hfrelease.evaluation.events import NullEvents

        yield NullEvents()

    @contextlib.contextmanager
    def speed(self, plan: SpeedPlan, run_dir: Path) -> Iterator[SpeedEvents]:
        from hfrelease.speed.runner import NullSpeedEvents

        yield NullSpeedEvents()


@dataclass(frozen=True, kw_only=True)
class EvalStageReport:
    """What an eval run measured and decided: the gates', the speed anchors', or both."""

    gates: EvalReport | None = None
    speed: SpeedReport | None = None
    hash_bytes_read: int = 0

    @property
    def exit_code(self) -> ExitCode:
        codes = [r.exit_code for r in (self.gates, self.speed) if r is not None]
        return worst(*codes) if codes else ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.gates is not None:
            data = {"exit_code": int(self.gates.exit_code), "servers_started": self.gates.servers_started,
                    "requests_sent": self.gates.requests_sent, "run_dir": str(self.gates.run_dir),
                    "hash_bytes_read": self.hash_bytes_read, "rows": [row.as_dict() for row in self.gates.rows],
                    "loads": [load.as_dict() for load in self.gates.loads]}
        if self.speed is not None:
            data |= {"speed": self.speed.as_dict(), "exit_code": int(self.exit_code)}
        return data


@dataclass(frozen=True, kw_only=True)
class EvalPlanReport:
    """What a run would do (`--dry-run`): the gate plan, the speed plan, or both; nothing is started."""

    gates: EvalPlan | None = None
    speed: SpeedPlan | None = None
    gate_servers: frozenset[str] = frozenset()  # artifacts whose no-speculation points run on the gate server
    sweeps_first: frozenset[str] = frozenset()  # ... before the gates: a concurrency sweep, their budget

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        from hfrelease.stages.eval_plan import gate_plan_dict, speed_plan_dict

        data = gate_plan_dict(self.gates) if self.gates is not None else {}
        if self.speed is not None:
            data["speed"] = speed_plan_dict(self.speed, self.gate_servers, self.sweeps_first)
        return data


@dataclass(frozen=True, kw_only=True)
class _Resolved:
    """The settings against the manifest: a draft named with --artifact runs its draft job."""

    manifest: Manifest
    artifacts: tuple[str, ...]
    gates: tuple[str, ...]
    speed: bool
    speed_only: bool
    drafts: tuple[str, ...]
    leave_drafts: bool


def _resolve(settings: EvalSettings) -> _Resolved:
    from hfrelease.manifest import find_manifest, load_manifest
    from hfrelease.manifest.selection import select

    loaded = load_manifest(settings.manifest)
    # Every unknown --artifact/--gate/--workload at once, before the guard starts vLLM's parser.
    chosen = select(loaded, artifacts=settings.artifacts, gates=settings.gates, workloads=settings.workloads)
    if settings.endpoint is None:  # the serve guard, in dry runs too: vLLM's parser reads the manifest's args
        from hfrelease.serving.guard import require_safe_manifest

        require_safe_manifest(loaded, source=str(find_manifest(settings.manifest)))
    _require_runnable(loaded, chosen.artifacts, chosen.gates, source=str(find_manifest(settings.manifest)))
    artifacts, gates = chosen.artifacts, chosen.gates
    speed = settings.speed or settings.speed_only
    speed_only = settings.speed_only
    # A draft's job (the release matrix runs `eval --artifact DRAFT` like any other entry): its speed
    # anchors are its gates, so it runs them without --speed; other artifacts named beside it run their gates.
    draft_ids = {d.id for d in loaded.artifact if d.kind == "draft"}
    drafts = () if speed and not settings.leave_drafts else tuple(a for a in artifacts if a in draft_ids)
    if settings.leave_drafts and not speed:
        raise UsageError("--leave-drafts says which speed anchors to run: add --speed")
    if drafts:
        speed = True
        speed_only = len(drafts) == len(artifacts)
        artifacts = tuple(a for a in artifacts if a not in drafts) or drafts
        gates = () if speed_only else gates
    if settings.workloads and not speed:
        raise UsageError("--workload selects speed anchors: add --speed or --speed-only")
    if speed_only and gates:
        raise UsageError("--gate selects gates, which --speed-only skips")
    if speed and settings.endpoint is not None:
        raise UsageError("--endpoint attaches to one server; speed anchors start one per speculative config")
    if settings.endpoint is not None and len(artifacts) != 1:
        raise UsageError("--endpoint attaches to one server: name its artifact with --artifact ID")
    return _Resolved(manifest=loaded, artifacts=artifacts, gates=gates, speed=speed, speed_only=speed_only,
                     drafts=drafts, leave_drafts=settings.leave_drafts)


def _require_runnable(manifest: Manifest, artifacts: tuple[str, ...], gates: tuple[str, ...], *, source: str) -> None:
    """Task data files lm-eval would not find and a quant scheme its checkpoint contradicts are exit 3 here,
    before a server starts (issue 27: lm-eval's FileNotFoundError came after the server, as exit 1)."""
    from hfrelease.errors import ConfigError
    from hfrelease.preflight import pre_server_problems

    problems = pre_server_problems(manifest, artifacts=artifacts, gates=gates)
    if problems:
        raise ConfigError(source, problems)


def _plan_speed(job: _Resolved, settings: EvalSettings, *, ledger: Ledger, cache: HashCache,
                dry_run: bool) -> SpeedPlan:
    """The speed plan of `--speed`, or for drafts named without --speed the draft jobs of those drafts."""
    from hfrelease.speed.drafts import plan_drafts
    from hfrelease.speed.plan import plan_speed

    if job.drafts:
        plan = plan_drafts(job.manifest, job.drafts, ledger=ledger, hash_cache=cache, workloads=settings.workloads,
                           force=settings.force, download=not dry_run)
    else:
        plan = plan_speed(job.manifest, ledger=ledger, hash_cache=cache, artifacts=job.artifacts,
                          workloads=settings.workloads, force=settings.force, download=not dry_run,
                          leave_drafts=job.leave_drafts)
    cache.save()
    return plan


def _plan_gates(job: _Resolved, settings: EvalSettings, *, ledger: Ledger, cache: HashCache,
                dry_run: bool) -> EvalPlan:
    from hfrelease.evaluation.plan import plan_eval

    plan = plan_eval(job.manifest, ledger=ledger, hash_cache=cache, artifacts=job.artifacts, gates=job.gates,
                     force=settings.force, download=not dry_run, attached=settings.endpoint is not None)
    cache.save()
    return plan


def plan_eval_stage(settings: EvalSettings, *, cache: HashCache | None = None) -> EvalPlanReport:
    """What `run_eval_stage(settings)` would start and run, each command built by the code that runs it."""
    from hfrelease.ledger.store import Ledger

    job = _resolve(settings)
    ledger = Ledger(job.manifest.ledger_dir)
    cache = cache or default_hash_cache()
    if job.speed_only:
        return EvalPlanReport(speed=_plan_speed(job, settings, ledger=ledger, cache=cache, dry_run=True))
    gates = _plan_gates(job, settings, ledger=ledger, cache=cache, dry_run=True)
    if not job.speed:
        return EvalPlanReport(gates=gates)
    speed = _plan_speed(job, settings, ledger=ledger, cache=cache, dry_run=True)
    first = sweeps_first(gates, speed)
    return EvalPlanReport(gates=_with_budgets_to_measure(gates, first), speed=speed,
                          gate_servers=frozenset(j.artifact.id for j in gates.servers if j.pending),
                          sweeps_first=frozenset(first))


def sweeps_first(gates: EvalPlan, speed: SpeedPlan) -> dict[str, PlannedSweep]:
    """Per artifact whose gates run at once on a server this run starts, the concurrency sweep its
    no-speculation speed points would record: those points are measured on the gate server before the gates
    (not after, as other shared points are), so the sweep's knee is the gates' budget in this very run."""
    from hfrelease.evaluation.budget import planned_sweep

    at_once = {j.artifact.id for j in gates.servers if j.pending and j.concurrent}
    found: dict[str, PlannedSweep] = {}
    for job in speed.servers:
        if job.speculative is None and job.artifact.id in at_once and job.pending:
            planned = planned_sweep((p.workload.id, p.concurrency, p.pending) for p in job.points
                                    if p.input_len is None)  # a context-length sweep is not a concurrency sweep
            if planned is not None:
                found[job.artifact.id] = planned
    return found


def _with_budgets_to_measure(plan: EvalPlan, first: dict[str, PlannedSweep]) -> EvalPlan:
    """`plan` as a dry run shows it: the budget of gates measured after a sweep says it comes from that sweep."""
    from dataclasses import replace

    from hfrelease.evaluation.budget import sweep_first

    return replace(plan, servers=tuple(
        replace(j, in_flight=sweep_first(j.in_flight, first[j.artifact.id]))
        if j.in_flight is not None and j.artifact.id in first else j for j in plan.servers))


def run_eval_stage(
    settings: EvalSettings, *, views: EvalViews | None = None, cache: HashCache | None = None,
) -> EvalStageReport:
    """Measure and record every pending gate (and speed point), then judge them all; SIGTERM stops the
    servers and keeps what was recorded, as Ctrl-C does."""
    from hfrelease.ledger.store import Ledger
    from hfrelease.speed.runner import SpeedSession

    views = views or NoViews()
    job = _resolve(settings)
    ledger = Ledger(job.manifest.ledger_dir)
    cache = cache or default_hash_cache()
    run_dir = settings.run_dir or Path("runs") / f"{job.manifest.family.name}-{run_stamp()}"
    with stage_signals():
        if job.speed_only:
            plan = _plan_speed(job, settings, ledger=ledger, cache=cache, dry_run=False)
            alone = _run_speed(SpeedSession(plan, ledger=ledger, run_dir=run_dir), views)
            return EvalStageReport(speed=alone, hash_bytes_read=cache.bytes_read)
        gate_plan = _plan_gates(job, settings, ledger=ledger, cache=cache, dry_run=False)
        session = None
        if job.speed:
            # Planned before the gates run, so each gate server can also serve its artifact's no-speculation
            # speed points (the same `vllm serve` command) before it stops: one start per artifact, not two.
            speed_plan = _plan_speed(job, settings, ledger=ledger, cache=cache, dry_run=False)
            session = SpeedSession(speed_plan, ledger=ledger, run_dir=run_dir)
        gates = _run_gates(gate_plan, settings, ledger=ledger, cache=cache, run_dir=run_dir, views=views,
                           session=session, first=sweeps_first(gate_plan, session.plan) if session else {})
        cache.save()
        speed = _run_speed(session, views) if session is not None else None
        return EvalStageReport(gates=gates, speed=speed, hash_bytes_read=cache.bytes_read)


def _run_gates(
    plan: EvalPlan, settings: EvalSettings, *, ledger: Ledger, cache: HashCache, run_dir: Path, views: EvalViews,
    session: SpeedSession | None, first: dict[str, PlannedSweep],
) -> EvalReport:
    from hfrelease.evaluation.runner import run_eval

    with views.gates(plan, run_dir) as events:
        sharing = _Sharing(session, events, ledger=ledger, sweeps_first=first) if session is not None else None
        report = run_eval(plan, ledger=ledger, run_dir=run_dir, hash_cache=cache, endpoint=settings.endpoint,
                          events=events, after_gates=sharing.after if sharing else None,
                          before_gates=sharing.before if sharing else None,
                          request_cache=cache_dir() / "requests", force=settings.force)
    ci_summary(gates=report)
    return report


def _run_speed(session: SpeedSession, views: EvalViews) -> SpeedReport:
    """Run what is left of `session` (what no gate server measured) and return its report."""
    with views.speed(session.plan, session.run_dir) as events:
        session.events = events
        session.run_remaining()
        report = session.report()
    ci_summary(speed=report)
    return report


class _SpeedOnGateServer:
    """Speed events of points measured on a gate server, told to the gate events as that artifact's state."""

    def __init__(self, events: EvalEvents, artifact_id: str) -> None:
        self.events = events
        self.artifact_id = artifact_id

    def server_state(self, server_id: str, state: str) -> None:
        self.events.server_state(self.artifact_id, f"speed: {state}")

    def point_progress(self, server_id: str, point_id: str, text: str) -> None:
        self.events.server_state(self.artifact_id, f"speed {point_id}: {text}")

    def log(self, message: str) -> None:
        self.events.log(message)


class _Sharing:
    """The hooks that measure an artifact's no-speculation speed points on its gate server: after its gates,
    or before them when those points record the artifact's concurrency sweep (`sweeps_first`), whose knee
    then becomes the gates' budget (`hfrelease.evaluation.budget.measured_first`)."""

    def __init__(self, session: SpeedSession, events: EvalEvents, *, ledger: Ledger,
                 sweeps_first: dict[str, PlannedSweep]) -> None:
        self.session = session
        self.events = events
        self.ledger = ledger
        self.sweeps_first = sweeps_first

    def before(self, job: ServerJob, server: VllmServer, command: ServeCommand) -> ServerJob:
        from dataclasses import replace

        from hfrelease.evaluation.budget import find_sweep, measured_first

        if job.artifact.id not in self.sweeps_first or job.in_flight is None or job.content is None:
            return job
        if not self._measure(job, server, command):
            return job
        sweep = find_sweep(self.ledger, artifact_id=job.artifact.id, content_sha256=job.content.sha256,
                           serve_display=job.public.display())
        manifest = self.session.plan.manifest
        in_flight = measured_first(manifest, [g.gate for g in job.pending], sweep, job.in_flight)
        self.events.log(f"{job.artifact.id}: gates at once, {in_flight.value} requests in flight: {in_flight.reason}")
        return replace(job, in_flight=in_flight, sweep=sweep or job.sweep)

    def after(self, job: ServerJob, server: VllmServer, command: ServeCommand) -> None:
        self._measure(job, server, command)

    def _measure(self, job: ServerJob, server: VllmServer, command: ServeCommand) -> bool:
        speed_job = self.session.shareable(job.artifact.id, command)
        if speed_job is None:
            return False
        self.session.measure_on(speed_job, server, command, events=_SpeedOnGateServer(self.events, job.artifact.id))
        return True


def ci_summary(*, gates: EvalReport | None = None, speed: SpeedReport | None = None) -> None:
    """Append the gate or speed table to the step summary when running on GitHub Actions."""
    from hfrelease.ci.github import CiEnvironment, append_summary, gate_summary, speed_summary

    ci = CiEnvironment.detect()
    if not ci.github_actions or ci.step_summary is None:
        return
    if gates is not None:
        append_summary(ci.step_summary, gate_summary(gates.rows))
    if speed is not None:
        append_summary(ci.step_summary, speed_summary(speed))
