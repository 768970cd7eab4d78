"""One workflow run as data: its settings (`RunSettings`), what a display is told meanwhile (`RunEvents`), and
how each step, each job and the whole run ended."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from hfrelease.ci.actions.workflow import Workflow

Status = Literal["success", "failure", "cancelled", "skipped"]


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """How one step ended; `substituted` says what stood in for a step that was not run as written."""

    label: str
    status: Status
    exit_code: int | None = None
    substituted: str | None = None
    detail: str = ""
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """One job (one matrix combination) as a workflow run shows it."""

    id: str
    name: str
    status: Status
    matrix: Mapping[str, Any] = field(default_factory=dict)
    steps: tuple[StepResult, ...] = ()
    outputs: Mapping[str, str] = field(default_factory=dict)
    workspace: Path | None = None
    seconds: float = 0.0
    detail: str = ""
    # `continue-on-error: true` on the job: a failure shows as one, but `needs.<id>.result` says success and
    # the run does not fail (GitHub's documented behaviour; actions/runner#1161, actions/toolkit#581).
    continue_on_error: bool = False

    @property
    def result(self) -> Status:
        """The job's `needs.<id>.result` and its weight in the run's conclusion."""
        return "success" if self.status == "failure" and self.continue_on_error else self.status

    def failed_step(self) -> StepResult | None:
        return next((s for s in self.steps if s.status == "failure"), None)

    def substitutions(self) -> list[str]:
        return [f"{s.label}: {s.substituted}" for s in self.steps if s.substituted]


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """A whole run: every job in the order it ran, and the Markdown its steps wrote to their summaries."""

    workflow: Path
    jobs: tuple[JobResult, ...]
    summary: str = ""

    @property
    def ok(self) -> bool:
        return not any(j.result in ("failure", "cancelled") for j in self.jobs)


class RunEvents(Protocol):
    """What a display is told while a run goes on."""

    def job_started(self, name: str) -> None: ...
    def step_finished(self, job: str, step: StepResult) -> None: ...
    def log(self, job: str, line: str) -> None: ...
    def job_finished(self, job: JobResult) -> None: ...


class NullRunEvents:
    def job_started(self, name: str) -> None:
        pass

    def step_finished(self, job: str, step: StepResult) -> None:
        pass

    def log(self, job: str, line: str) -> None:
        pass

    def job_finished(self, job: JobResult) -> None:
        pass


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """One run: the workflow, the work tree checkout copies, where jobs run, what triggered it, its secrets."""

    workflow: Workflow
    source: Path  # the repository's work tree
    commit: str | None = None  # the commit checkout gives the jobs (None: no commit; a copy of `source`)
    work_dir: Path  # jobs/, artifacts/, logs/ go here (left out of checkouts)
    ref_name: str
    ref_type: str = "tag"
    secrets: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))  # the runner's own environment
    leave_out: tuple[Path, ...] = ()  # more directories checkout must not copy (e.g. the local Hub's root)
    # Variables each job gets set to an empty directory of its own (e.g. HF_HOME): the caches an ephemeral
    # runner starts without, so nothing a job needs comes from this machine's.
    fresh_dirs: tuple[str, ...] = ()
    # ACTIONS_ID_TOKEN_REQUEST_URL/_TOKEN for a job granted `id-token: write` (an OIDC issuer standing in for
    # GitHub's); empty: no job can mint an id token.
    id_token: Mapping[str, str] = field(default_factory=dict)
