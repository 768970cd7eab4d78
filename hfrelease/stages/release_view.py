"""What `hfrelease release` prints: each job as it runs, the rehearsal's table, and its steps' (`--only`)
messages, as views (`hfrelease.stages.view`) the CLI draws."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hfrelease.stages.view import Block, Line, Styled, line, note, table

if TYPE_CHECKING:
    from hfrelease.ci.actions.run import JobResult, StepResult
    from hfrelease.ci.rehearsal import RehearsalReport
    from hfrelease.manifest import Manifest
    from hfrelease.publish import PublishReport
    from hfrelease.publish.decision import GateDecision, MatrixEntry
    from hfrelease.publish.readback import VerifiedRepo

_STATUS_STYLE = {"success": "green", "failure": "red", "skipped": "dim", "cancelled": "yellow"}


class JobLines:
    """The rehearsal's `RunEvents` as lines: each job's start, its steps' output and conclusions; on GitHub
    Actions each job is one fold."""

    def __init__(self, emit: Callable[[Line], None], *, folds: bool) -> None:
        self.emit, self.folds, self.open = emit, folds, False

    def job_started(self, name: str) -> None:
        from hfrelease.ci.github import group_start

        self.open = True
        self.emit(line(group_start(f"job: {name}"), err=True) if self.folds else
                  line(Styled(f"==> {name}", "bold cyan"), err=True, wrap=True))

    def step_finished(self, job: str, step: StepResult) -> None:
        what = f" (substituted: {step.substituted})" if step.substituted else ""
        detail = f": {step.detail}" if step.detail and step.status != "success" else ""
        self.emit(line("  ", Styled(step.status, _STATUS_STYLE[step.status]), f" {step.label}{what}{detail}", err=True))

    def log(self, job: str, text: str) -> None:
        from hfrelease.redact import redact

        self.emit(line(f"    {redact(text)}", err=True))

    def job_finished(self, job: JobResult) -> None:
        from hfrelease.ci.github import group_end

        if self.folds and self.open:
            self.emit(line(group_end(), err=True, wrap=True))
        self.open = False
        self.emit(line(Styled(job.status, _STATUS_STYLE[job.status]), f" {job.name} ({job.seconds:.0f} s) {job.detail}",
                       err=True))


def rehearsal_view(report: RehearsalReport) -> list[Block]:
    """Every job's conclusion, what was substituted where, and whether the release succeeded."""
    view: list[Block] = [table(
        f"release {report.family} {report.tag}: {report.workflow} (Hub {report.hub}, work {report.work_dir})",
        ("job", "conclusion", "time", "detail"),
        [(job.name, job.status, f"{job.seconds:.0f} s", job.detail) for job in report.jobs])]
    view += [note(f"in {job.name}: {what}", label="substituted") for job in report.jobs for what in job.substitutions()]
    view.append(note(report.checkout_note(), label="warning:" if report.uncommitted else "checkout"))
    if report.error is None:
        view.append(line(Styled(f"the release workflow of {report.family} {report.tag} succeeded", "bold green"),
                         err=True, wrap=True))
    return view


def check_step_view(loaded: Manifest, entries: Sequence[MatrixEntry]) -> list[Block]:
    return [line(Styled("✓", "green"), f" tag {loaded.tag_name()} is {loaded.family.name}'s release; eval matrix: "
                 + ", ".join(e.artifact for e in entries), err=True, wrap=True)]


def gate_step_view(decision: GateDecision) -> list[Block]:
    """What the gate step allowed (unpublished artifacts' failures) and, when it passes, that it does."""
    view: list[Block] = [note(p.text, label="allowed (publish = false):") for p in decision.allowed]
    if decision.error() is None:
        drafts = f" and {len(decision.draft_checks)} draft-gate check(s)" if decision.draft_checks else ""
        view.append(line(Styled("✓", "green"), f" {len(decision.rows)} gate result(s){drafts}: every published "
                         "artifact passes", err=True, wrap=True))
    return view


def publish_step_view(report: PublishReport, verified: Sequence[VerifiedRepo]) -> list[Block]:
    assert report.outcome is not None  # the publish step never dry-runs
    return [line(Styled(report.outcome.message, "bold green"),
                 f"; {len(verified)} repo(s) downloaded back and verified", err=True)]
