"""A workflow file read into jobs and steps, as far as running it needs (values keep their `${{ }}`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigError, ConfigProblem


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step: a `run:` script or a `uses:` action, with its `if:`, `env:` and `with:` unevaluated."""

    index: int
    id: str | None
    name: str | None
    run: str | None
    uses: str | None
    with_: Mapping[str, Any]
    env: Mapping[str, Any]
    if_: Any
    shell: str | None
    working_directory: str | None
    continue_on_error: Any

    def label(self) -> str:
        """What GitHub shows for a step without a name: `Run <first line>` or `Run <action>`."""
        if self.name:
            return self.name
        if self.uses:
            return f"Run {self.uses.split('@', 1)[0]}"
        return f"Run {(self.run or '').strip().splitlines()[0] if (self.run or '').strip() else ''}"


@dataclass(frozen=True, kw_only=True)
class Job:
    """One job of the graph; `needs` in the order written."""

    id: str
    name: str | None
    needs: tuple[str, ...]
    if_: Any
    env: Mapping[str, Any]
    outputs: Mapping[str, Any]
    matrix: Any  # `strategy.matrix`: a mapping or one expression
    fail_fast: Any
    timeout_minutes: Any
    continue_on_error: Any
    working_directory: str | None
    shell: str | None
    environment: Any
    steps: tuple[Step, ...]
    permissions: Any = None  # the job's GITHUB_TOKEN permissions (None: the workflow's)


@dataclass(frozen=True, kw_only=True)
class Workflow:
    """The jobs of one workflow file, in the file's order, with the top-level `env`."""

    path: Path
    name: str
    env: Mapping[str, Any]
    jobs: Mapping[str, Job]

    def order(self) -> list[str]:
        """The jobs in an order that respects `needs` (the file's order among jobs that are ready together)."""
        done: list[str] = []
        pending = list(self.jobs)
        while pending:
            ready = [j for j in pending if all(n in done for n in self.jobs[j].needs)]
            if not ready:
                raise _invalid(self.path, "jobs", f"the needs of {', '.join(pending)} form a cycle")
            done.append(ready[0])
            pending.remove(ready[0])
        return done

    def ancestors(self, job_id: str) -> set[str]:
        """Every job `job_id` needs, directly or through others."""
        seen: set[str] = set()
        stack = list(self.jobs[job_id].needs)
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.jobs[current].needs)
        return seen


def _invalid(path: Path, location: str, message: str) -> ConfigError:
    error = ConfigError(str(path), [ConfigProblem(location=location, message=message)])
    error.hint = "GitHub would refuse to start this workflow; actionlint reports it too."
    return error


def _needs(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def _steps(path: Path, job_id: str, raw: Sequence[Any]) -> tuple[Step, ...]:
    steps = []
    for index, step in enumerate(raw):
        if not isinstance(step, Mapping) or ("run" in step) == ("uses" in step):
            raise _invalid(path, f"jobs.{job_id}.steps[{index}]", "a step has exactly one of run: or uses:")
        steps.append(Step(
            index=index, id=step.get("id"), name=step.get("name"), run=step.get("run"), uses=step.get("uses"),
            with_=step.get("with") or {}, env=step.get("env") or {}, if_=step.get("if"), shell=step.get("shell"),
            working_directory=step.get("working-directory"), continue_on_error=step.get("continue-on-error", False),
        ))
    return tuple(steps)


def load_workflow(path: Path) -> Workflow:
    """Read a workflow file; a `needs` naming no job or a cycle is refused, as GitHub refuses to start it."""
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, Mapping) or not isinstance(data.get("jobs"), Mapping):
        raise _invalid(path, "jobs", "a workflow needs a `jobs:` mapping")
    jobs = {}
    for job_id, raw in data["jobs"].items():
        if not isinstance(raw, Mapping):
            raise _invalid(path, f"jobs.{job_id}", "a job is a mapping")
        if "uses" in raw:
            raise _invalid(path, f"jobs.{job_id}", "reusable workflows (jobs.<id>.uses) are not rehearsed")
        strategy = raw.get("strategy") or {}
        defaults = (raw.get("defaults") or {}).get("run") or {}
        top = (data.get("defaults") or {}).get("run") or {}
        jobs[str(job_id)] = Job(
            id=str(job_id), name=raw.get("name"), needs=_needs(raw.get("needs")), if_=raw.get("if"),
            env=raw.get("env") or {}, outputs=raw.get("outputs") or {}, matrix=strategy.get("matrix"),
            fail_fast=strategy.get("fail-fast", True), timeout_minutes=raw.get("timeout-minutes", 360),
            continue_on_error=raw.get("continue-on-error", False),
            working_directory=defaults.get("working-directory", top.get("working-directory")),
            shell=defaults.get("shell", top.get("shell")), environment=raw.get("environment"),
            steps=_steps(path, str(job_id), raw.get("steps") or ()),
            permissions=raw.get("permissions", data.get("permissions")),
        )
    for job in jobs.values():
        for need in job.needs:
            if need not in jobs:
                raise _invalid(path, f"jobs.{job.id}.needs", f"job {job.id!r} depends on unknown job {need!r}")
    workflow = Workflow(path=path, name=str(data.get("name") or path.name), env=data.get("env") or {}, jobs=jobs)
    workflow.order()  # refuses a cycle now, before anything runs
    return workflow
