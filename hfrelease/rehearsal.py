"""`hfrelease release`: the job graph of `.github/workflows/release.yml`, run on one machine.

The same jobs under the same names (`release_policy.JOBS`), handing each other the same files:

    check    the tag is the manifest's release tag; the eval matrix is listed
    eval     one job per artifact, each in its own directory with its own copy of the ledger (as each
             matrix job has its own checkout), recording into that copy
    merge    the jobs' ledgers merged into the family's, then every gate judged on the merged ledger
             under the release policy (`release_policy`): a published artifact's problem stops here
    render   cards from the merged ledger, then linted
    publish  all-or-nothing upload (never a dry run), then every release tag downloaded and verified

A job that fails skips the jobs after it, as `needs:` does; eval jobs all run (`fail-fast: false`).
The family directory is worked on in place, as a workflow works on its checkout: run it on a copy.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from hfrelease.ci import CiEnvironment, append_summary, gate_summary, markdown_table
from hfrelease.errors import (
    ExitCode,
    GateFailedError,
    HfreleaseError,
    LedgerError,
    MeasurementError,
    PublishError,
    ServerError,
)
from hfrelease.evaluation.runner import EvalEvents, EvalReport, GateRow, run_eval
from hfrelease.ledger.hashing import HashCache
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.publish import LOCAL, PublishReport, open_hub, publish_family, resolve_token
from hfrelease.release_policy import GateDecision, MatrixEntry, check_tag, decide_gates, eval_matrix
from hfrelease.verification import VerifiedRepo, verify_family

# `--hub manifest`: the manifest's [publish].endpoint, so a workflow never restates where the family goes.
MANIFEST_HUB = "manifest"

JobStatus = Literal["success", "failure", "skipped"]


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """One job of the graph as a workflow run shows it: name, conclusion, time, one line of detail."""

    name: str
    status: JobStatus
    seconds: float = 0.0
    detail: str = ""


class RehearsalEvents(Protocol):
    """What a display is told while the graph runs (the CLI folds each job into a `::group::`)."""

    def job_started(self, name: str) -> None: ...
    def job_finished(self, job: JobResult) -> None: ...
    def log(self, message: str) -> None: ...


class NullRehearsalEvents:
    def job_started(self, name: str) -> None:
        pass

    def job_finished(self, job: JobResult) -> None:
        pass

    def log(self, message: str) -> None:
        pass


@dataclass(frozen=True, kw_only=True)
class RehearsalReport:
    """What ran and how it ended; `error` is what stopped the release (None when it was published)."""

    family: str
    tag: str
    hub: str
    work_dir: Path
    matrix: tuple[MatrixEntry, ...] = ()
    jobs: tuple[JobResult, ...] = ()
    rows: tuple[GateRow, ...] = ()  # the gates as judged after the merge
    allowed: tuple[str, ...] = ()  # problems of unpublished artifacts, reported only
    publish: PublishReport | None = None
    verified: tuple[VerifiedRepo, ...] = ()
    error: HfreleaseError | None = None

    @property
    def exit_code(self) -> ExitCode:
        return self.error.exit_code if self.error is not None else ExitCode.OK


class _EvalLog:
    """Turns the eval runner's progress into log lines: server states and finished gates, not every request."""

    def __init__(self, job: str, events: RehearsalEvents) -> None:
        self.job = job
        self.events = events
        self.last: dict[str, str] = {}

    def server_state(self, artifact_id: str, state: str) -> None:
        # "starting (12 s)" is polled every second: only the change of state is news.
        kind = state.split(" (", maxsplit=1)[0]
        if self.last.get(artifact_id) != kind:
            self.last[artifact_id] = kind
            self.events.log(f"[{self.job}] server {artifact_id}: {state}")

    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None:
        pass

    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None:
        self.events.log(f"[{self.job}] {artifact_id} {gate_id}: {summary}")

    def log(self, message: str) -> None:
        self.events.log(f"[{self.job}] {message}")


def _eval_job_outcome(entry: MatrixEntry, report: EvalReport) -> tuple[JobStatus, str, HfreleaseError | None]:
    """A matrix job's conclusion: the eval's exit code, except that an unpublished artifact may fail a gate."""
    code = report.exit_code
    measured = f"{report.servers_started} server(s), {len(report.records)} record(s)"
    if code == ExitCode.OK:
        return "success", measured, None
    failing = "; ".join(f"{r.gate_id}: {r.verdict} ({r.reason})" for r in report.rows
                        if r.verdict in ("fail", "void"))
    if code == ExitCode.GATE_FAILED and not entry.publish:
        return "success", f"{measured}; gate failure allowed (publish = false): {failing}", None
    error_type = GateFailedError if code == ExitCode.GATE_FAILED else MeasurementError
    return "failure", f"{measured}; {failing}", error_type(
        f"eval of {entry.artifact}: {failing}",
        hint="A published artifact must pass every gate; see the job's logs and its gate table.")


def _draft_job(
    manifest: Manifest, entry: MatrixEntry, *, ledger: Ledger, run_dir: Path, hash_cache: HashCache | None,
) -> tuple[JobStatus, str, HfreleaseError | None]:
    """A draft's matrix job, as `hfrelease eval --artifact DRAFT` runs it: its speed anchors and draft gates."""
    from hfrelease.speed.drafts import plan_drafts
    from hfrelease.speed.runner import run_speed

    plan = plan_drafts(manifest, [entry.artifact], ledger=ledger, hash_cache=hash_cache)
    report = run_speed(plan, ledger=ledger, run_dir=run_dir)
    code = report.exit_code
    measured = f"{report.servers_started} server(s), {len(report.records)} record(s)"
    if code == ExitCode.OK:
        return "success", measured, None
    failing = "; ".join([*report.failures, *(f"{c.check} on {c.workload_id}: {c.reason}" for c in report.draft_checks
                                             if c.verdict == "fail"),
                         *(f"{r.workload_id} [{r.speculative}]: void ({r.reason})" for r in report.rows
                           if r.status == "void")])
    if code == ExitCode.GATE_FAILED and not entry.publish:
        return "success", f"{measured}; draft gate failure allowed (publish = false): {failing}", None
    error_type = {ExitCode.GATE_FAILED: GateFailedError, ExitCode.SERVER_FAILED: ServerError}.get(
        code, MeasurementError)
    return "failure", f"{measured}; {failing}", error_type(
        f"eval of {entry.artifact}: {failing}",
        hint="A published draft must pass its draft gates; see the job's logs and its draft-gate table.")


def publish_and_verify(
    manifest: Manifest,
    *,
    hub: str,
    hub_root: Path | None,
    artifacts: Sequence[str],
    out_dir: Path,
    cache: HashCache | None,
    echo: Callable[[str], None],
    on_event: Callable[..., None] | None = None,
) -> tuple[PublishReport, tuple[VerifiedRepo, ...]]:
    """The publish job: release all-or-nothing (never a dry run), then download every tag back and verify it."""
    target_hub = manifest.publish.endpoint if hub == MANIFEST_HUB else hub
    if target_hub != LOCAL and resolve_token() is None:
        # `hfrelease publish` without a token is a dry run that exits 0; a release job must not pass that way.
        raise PublishError(
            f"no Hub token to publish to {target_hub} with",
            hint="Give the publish job's environment an HF_TOKEN secret (a fine-grained token with write access "
                 "to the family's repos), or set HF_OIDC_RESOURCE for trusted publishing.")
    report = publish_family(manifest, hub=target_hub, hub_root=hub_root, dry_run=False, artifacts=artifacts,
                            cache=cache, echo=echo, on_event=on_event)
    if report.outcome is None or report.outcome.status == "staged":
        # [publish].pr: the repos wait as pull requests for review; there is no release tag to verify yet.
        return report, ()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    with open_hub(target_hub, family_root=manifest.root, hub_root=hub_root) as target:
        token = target.token or resolve_token()
        verified = verify_family(manifest, endpoint=target.endpoint, token=token.value if token else None,
                                 out_dir=out_dir, artifacts=tuple(artifacts))
    return report, tuple(verified)


def render_cards(manifest: Manifest, *, artifacts: Sequence[str] = ()) -> tuple[int, int]:
    """The render job: cards from the ledger, written, then linted; (cards, files changed)."""
    from hfrelease.cards import apply_changes, lint_cards, plan_changes, read_cards, read_inputs, render_family
    from hfrelease.cards.errors import CardLintError

    inputs = read_inputs(manifest)
    rendered = render_family(inputs, artifacts=list(artifacts) or None)
    changes = plan_changes(rendered, manifest.root)
    apply_changes(changes)
    cards, problems = read_cards(manifest)
    if artifacts:
        # A restricted rehearsal renders only its artifacts: the others' cards are not expected to exist.
        cards = [c for c in cards if c.artifact_id in artifacts]
        problems = [p for p in problems if any(f"/{a}/README.md" in p for a in artifacts)]
    problems += lint_cards(manifest, cards, inputs=inputs, today=datetime.now(UTC).date())
    if problems:
        raise CardLintError(problems)
    return len(rendered.cards), len(changes)


class _Graph:
    """Runs jobs in order; after a failure every later job is skipped, as `needs:` skips them."""

    def __init__(self, events: RehearsalEvents) -> None:
        self.events = events
        self.jobs: list[JobResult] = []
        self.error: HfreleaseError | None = None

    @contextmanager
    def job(self, name: str) -> Iterator[list[str]]:
        """Run the block as job `name`; it appends its detail line to the yielded list."""
        detail: list[str] = []
        self.events.job_started(name)
        started = time.monotonic()
        try:
            yield detail
        except HfreleaseError as exc:
            self.error = self.error or exc
            self._finish(JobResult(name=name, status="failure", seconds=time.monotonic() - started,
                                   detail=exc.message.splitlines()[0]))
            return
        self._finish(JobResult(name=name, status="success", seconds=time.monotonic() - started,
                               detail="; ".join(detail)))

    def add(self, job: JobResult, error: HfreleaseError | None = None) -> None:
        if error is not None:
            self.error = self.error or error
        self._finish(job)

    def skip(self, name: str) -> None:
        self._finish(JobResult(name=name, status="skipped", detail="a job it needs failed"))

    def _finish(self, job: JobResult) -> None:
        self.jobs.append(job)
        self.events.job_finished(job)


def _run_matrix(
    graph: _Graph, manifest: Manifest, matrix: Sequence[MatrixEntry], *, work_dir: Path, gates: Sequence[str],
    hash_cache: HashCache | None, evaluate: Callable[..., EvalReport],
) -> list[Path]:
    """The eval jobs, one after another (one vLLM server at a time); returns each job's ledger directory."""
    from hfrelease.evaluation.plan import plan_eval

    family_ledger = manifest.root / "results"
    job_ledgers: list[Path] = []
    for entry in matrix:
        name = f"eval ({entry.artifact})"
        job_dir = work_dir / f"eval-{entry.artifact}"
        graph.events.job_started(name)
        started = time.monotonic()
        try:
            if job_dir.exists():
                shutil.rmtree(job_dir)
            ledger_dir = job_dir / "results"
            # Each matrix job starts from the checkout's ledger: records already committed are not re-measured.
            if family_ledger.is_dir():
                shutil.copytree(family_ledger, ledger_dir)
            else:
                ledger_dir.mkdir(parents=True)
            ledger = Ledger(ledger_dir)
            if manifest.artifact_by_id(entry.artifact).kind == "draft":
                status, detail_line, error = _draft_job(manifest, entry, ledger=ledger, run_dir=job_dir / "runs",
                                                        hash_cache=hash_cache)
            else:
                plan = plan_eval(manifest, ledger=ledger, hash_cache=hash_cache, artifacts=[entry.artifact],
                                 gates=gates)
                log: EvalEvents = _EvalLog(name, graph.events)
                result = evaluate(plan, ledger=ledger, run_dir=job_dir / "runs", hash_cache=hash_cache, events=log)
                status, detail_line, error = _eval_job_outcome(entry, result)
        except HfreleaseError as exc:
            status, detail_line, error = "failure", exc.message.splitlines()[0], exc
        job_ledgers.append(job_dir / "results")
        graph.add(JobResult(name=name, status=status, seconds=time.monotonic() - started, detail=detail_line), error)
    return job_ledgers


def merge_and_judge(
    manifest: Manifest, sources: Sequence[Path], *, hash_cache: HashCache | None, artifacts: Sequence[str] = (),
    gates: Sequence[str] = (), detail: list[str] | None = None,
) -> GateDecision:
    """The merge job: the matrix's ledgers into the family's, then the release gate's decision (not raised)."""
    family_ledger = Ledger(manifest.root / "results")
    merged = family_ledger.merge([p for p in sources if p.is_dir()])
    if merged.skipped_invalid:
        raise LedgerError("records of the eval jobs could not be merged:\n" + "\n".join(
            f"  - {s.path}: {s.reason}" for s in merged.skipped_invalid))
    decision = decide_gates(manifest, ledger=family_ledger, hash_cache=hash_cache, artifacts=artifacts, gates=gates)
    if detail is not None:
        detail.append(f"{len(merged.added)} record(s) added, {len(merged.identical)} already there; "
                      f"{len(decision.rows)} gate result(s) judged")
        if decision.allowed:
            detail.append(f"{len(decision.allowed)} problem(s) of unpublished artifacts allowed")
    return decision


def rehearse(
    manifest_path: Path,
    *,
    work_dir: Path,
    hub: str = LOCAL,
    tag: str | None = None,
    artifacts: Sequence[str] = (),
    gates: Sequence[str] = (),
    hub_root: Path | None = None,
    hash_cache: HashCache | None = None,
    env: Mapping[str, str] | None = None,
    events: RehearsalEvents | None = None,
    evaluate: Callable[..., EvalReport] = run_eval,
) -> RehearsalReport:
    """Run check → eval (per artifact) → merge → render → publish on this machine; never raises a job's error.

    `tag` is the tag being released (default: the manifest's own); `artifacts`/`gates` restrict the graph;
    `hub` is `local` (the built-in Hub on `hub_root`, default `work_dir/hub`), a URL, or `manifest`. The
    step summary goes to `GITHUB_STEP_SUMMARY` of `env` when set, also when the release stopped.
    """

    events = events or NullRehearsalEvents()
    ci = CiEnvironment.detect(env)
    work_dir.mkdir(parents=True, exist_ok=True)
    hub_root = hub_root or (work_dir / "hub" if hub == LOCAL else None)
    graph = _Graph(events)
    manifest: Manifest | None = None
    matrix: list[MatrixEntry] = []
    release_tag = tag or "?"
    with graph.job("check") as detail:
        manifest = load_manifest(manifest_path)
        release_tag = check_tag(manifest, tag)
        matrix = eval_matrix(manifest, artifacts, gates)
        detail.append(f"tag {release_tag}; matrix: {', '.join(e.artifact for e in matrix) or '(empty)'}")
    report = RehearsalReport(family=manifest.family.name if manifest else str(manifest_path), tag=release_tag,
                             hub=hub, work_dir=work_dir, matrix=tuple(matrix))
    if manifest is None or graph.error is not None:
        for name in ("eval", "merge", "render", "publish"):
            graph.skip(name)
        return _finish(report, graph, ci)

    job_ledgers = _run_matrix(graph, manifest, matrix, work_dir=work_dir, gates=gates, hash_cache=hash_cache,
                              evaluate=evaluate)
    if graph.error is not None:
        for name in ("merge", "render", "publish"):
            graph.skip(name)
        return _finish(report, graph, ci)

    decision = None
    with graph.job("merge") as detail:
        decision = merge_and_judge(manifest, job_ledgers, hash_cache=hash_cache, artifacts=artifacts, gates=gates,
                                   detail=detail)
        stop = decision.error()
        if stop is not None:
            raise stop
    if decision is not None:
        report = replace(report, rows=decision.rows, allowed=tuple(p.text for p in decision.allowed))
    if graph.error is not None:
        graph.skip("render")
        graph.skip("publish")
        return _finish(report, graph, ci)

    with graph.job("render") as detail:
        cards, changed = render_cards(manifest, artifacts=artifacts)
        detail.append(f"{cards} card(s) rendered, {changed} file(s) changed, linted")
    if graph.error is not None:
        graph.skip("publish")
        return _finish(report, graph, ci)

    with graph.job("publish") as detail:
        published, verified = publish_and_verify(
            manifest, hub=hub, hub_root=hub_root, artifacts=artifacts, out_dir=work_dir / "verify", cache=hash_cache,
            echo=lambda line: events.log(f"[publish] {line}"))
        report = replace(report, publish=published, verified=verified)
        outcome = published.outcome
        detail.append(f"{outcome.message if outcome else 'nothing published'}; {len(verified)} repo(s) verified")
    return _finish(report, graph, ci)


def _finish(report: RehearsalReport, graph: _Graph, ci: CiEnvironment) -> RehearsalReport:
    done = replace(report, jobs=tuple(graph.jobs), error=graph.error)
    if ci.step_summary is not None:
        append_summary(ci.step_summary, summary_markdown(done))
    return done


_MARKS = {"success": "✅ success", "failure": "❌ failure", "skipped": "⏭️ skipped"}


def summary_markdown(report: RehearsalReport) -> str:
    """The step summary of a release: its jobs, the gates as judged after the merge, what was published."""
    conclusion = "published" if report.error is None else f"stopped (exit {int(report.exit_code)})"
    parts = [f"## Release {report.family} {report.tag}: {conclusion}"]
    if report.error is not None:
        parts.append("```\n" + report.error.message + "\n```")
    parts.append(markdown_table(("job", "conclusion", "time", "detail"), [
        (j.name, _MARKS[j.status], f"{j.seconds:.0f} s", j.detail) for j in report.jobs]))
    if report.rows:
        parts.append(gate_summary(report.rows, title="Gates after the merge"))
    if report.allowed:
        parts.append("Allowed (artifacts with `publish = false`):\n\n" + "\n".join(f"- {p}" for p in report.allowed))
    if report.publish is not None and report.publish.outcome is not None:
        parts.append(markdown_table(("repo", "status", "commit", "tag"), [
            (o.repo, o.status, (o.commit or "")[:12], report.publish.outcome.tag)
            for o in report.publish.outcome.repos]))
    if report.verified:
        parts.append("Verified against MANIFEST: " + ", ".join(f"{v.repo} ({v.files} files)" for v in report.verified))
    return "\n\n".join(parts)

