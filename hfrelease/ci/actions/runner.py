"""Run a workflow's jobs on this machine the way GitHub Actions runs them, one job at a time.

- Jobs start in an order that respects `needs`; a job runs when its `if:` holds (by default: every job it
  needs succeeded), else it is skipped. `needs.<id>` holds only the jobs a job names, as on GitHub.
- A matrix (`strategy.matrix`, also an expression such as `fromJSON(needs.check.outputs.matrix)`) makes one
  job per combination; with `fail-fast` (the default) a failure cancels the combinations not yet run.
- Each job gets a fresh, empty workspace; its steps run in order: `run:` scripts as subprocesses in the
  shell GitHub uses (`bash -e {0}` unless `shell:` says otherwise), with the workflow's, job's and step's
  `env` evaluated and per-step GITHUB_OUTPUT / GITHUB_ENV / GITHUB_PATH / GITHUB_STEP_SUMMARY files.
- Nothing carries state between jobs but job outputs and artifacts (`artifact.py`), as on GitHub.
- Steps that cannot run as written are substituted (`substitute.py`) and say so in the job's report.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfrelease.ci.actions import substitute
from hfrelease.ci.actions.artifact import ArtifactStepError, ArtifactStore
from hfrelease.ci.actions.expression import ExpressionError, condition, interpolate, plain, to_string, truthy
from hfrelease.ci.actions.matrix import MatrixError, expand_matrix
from hfrelease.ci.actions.run import JobResult, NullRunEvents, RunEvents, RunResult, RunSettings, Status, StepResult
from hfrelease.ci.actions.workflow import Job, Step

_SHELLS = {
    None: "bash -e {0}",
    "bash": "bash --noprofile --norc -eo pipefail {0}",
    "sh": "sh -e {0}",
    "python": "python {0}",
}


class _StepFailure(Exception):
    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _file_commands(path: Path) -> dict[str, str]:
    """`name=value` and `name<<DELIM ... DELIM` lines, as GITHUB_OUTPUT and GITHUB_ENV hold them."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip():
            continue
        heredoc = re.match(r"^([^=<]+)<<(.+)$", line)
        if heredoc:
            name, delimiter = heredoc.group(1), heredoc.group(2)
            body: list[str] = []
            while index < len(lines) and lines[index] != delimiter:
                body.append(lines[index])
                index += 1
            if index >= len(lines):
                raise _StepFailure(f"Matching delimiter not found '{delimiter}'")
            index += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, _, value = line.partition("=")
            values[name] = value
        else:
            raise _StepFailure(f"Invalid format '{line}'")
    return values


class _Runner:
    def __init__(self, settings: RunSettings, events: RunEvents) -> None:
        self.settings = settings
        self.workflow = settings.workflow
        self.events = events
        self.artifacts = ArtifactStore(root=settings.work_dir / "artifacts")
        self.results: dict[str, list[JobResult]] = {}
        self.summaries: list[str] = []
        self.run_id = str(int(time.time()))

    # -- contexts ---------------------------------------------------------------------------------------
    def github(self, job_id: str, workspace: Path) -> dict[str, Any]:
        ref = f"refs/{'tags' if self.settings.ref_type == 'tag' else 'heads'}/{self.settings.ref_name}"
        return {
            "ref_name": self.settings.ref_name, "ref": ref, "ref_type": self.settings.ref_type,
            "event_name": "push", "event": {"ref": ref}, "workspace": str(workspace), "job": job_id,
            "run_id": self.run_id, "run_number": "1", "run_attempt": "1", "repository": "local/rehearsal",
            "sha": self.settings.commit or "0" * 40, "actor": "rehearsal", "server_url": "https://github.com",
            "workflow": self.workflow.name,
        }

    def needs(self, job: Job) -> dict[str, Any]:
        return {n: {"result": self.aggregate(n), "outputs": self.outputs(n)} for n in job.needs}

    def aggregate(self, job_id: str) -> Status:
        statuses = {r.result for r in self.results.get(job_id, [])}
        for status in ("failure", "cancelled", "success"):
            if status in statuses:
                return status
        return "skipped"

    def outputs(self, job_id: str) -> dict[str, str]:
        merged: dict[str, str] = {}
        for result in self.results.get(job_id, []):  # matrix jobs: the last one to set an output wins
            merged.update({k: v for k, v in result.outputs.items() if v != ""})
        return merged

    # -- jobs -------------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        ordered: list[JobResult] = []
        for job_id in self.workflow.order():
            self.results[job_id] = self.run_job(self.workflow.jobs[job_id])
            ordered.extend(self.results[job_id])
        return RunResult(workflow=self.workflow.path, jobs=tuple(ordered), summary="\n".join(self.summaries))

    def base_contexts(self, job: Job, workspace: Path) -> dict[str, Any]:
        return {"github": self.github(job.id, workspace), "needs": self.needs(job),
                "secrets": dict(self.settings.secrets), "vars": {}, "inputs": {}, "env": {}, "matrix": {},
                "strategy": {},
                "runner": {"os": "Linux", "arch": "X64", "name": "rehearsal", "temp": str(workspace) + ".temp"}}

    def run_job(self, job: Job) -> list[JobResult]:
        contexts = self.base_contexts(job, self.settings.work_dir)
        needs_ok = all(self.aggregate(n) == "success" for n in job.needs)
        status_functions = {
            "success": lambda: needs_ok,
            "failure": lambda: any(self.aggregate(a) == "failure" for a in self.workflow.ancestors(job.id)),
            "cancelled": lambda: False,
            "always": lambda: True,
        }
        title = job.name if isinstance(job.name, str) and "${{" not in job.name else job.id
        try:
            if not condition(job.if_, contexts, status_functions):
                reason = "a job it needs did not succeed" if not needs_ok else "its if: is false"
                result = JobResult(id=job.id, name=title, status="skipped", detail=reason)
                self.events.job_finished(result)
                return [result]
            matrix = job.matrix
            if isinstance(matrix, str):
                matrix = interpolate(matrix, contexts)
            combos = expand_matrix(plain(_evaluate_tree(matrix, contexts)) if matrix is not None else None)
            fail_fast = truthy(_evaluate_tree(job.fail_fast, contexts))
        except (ExpressionError, MatrixError) as error:
            result = JobResult(id=job.id, name=title, status="failure", detail=_message(error))
            self.events.job_started(title)
            self.events.job_finished(result)
            return [result]
        results: list[JobResult] = []
        for index, combo in enumerate(combos):
            # A job failing under its own `continue-on-error` cancels nothing (GitHub's docs, strategy.fail-fast).
            if fail_fast and job.matrix is not None and any(r.result == "failure" for r in results):
                name = self.job_name(job, combo, contexts)
                results.append(JobResult(id=job.id, name=name, status="cancelled", matrix=combo,
                                         detail="cancelled: another job of the matrix failed (fail-fast)"))
                self.events.job_finished(results[-1])
                continue
            strategy = {"fail-fast": bool(fail_fast), "job-index": index, "job-total": len(combos), "max-parallel": 1}
            suffix = f"-{index + 1}" if job.matrix is not None else ""
            results.append(self.run_combination(job, combo, strategy, suffix))
        return results

    def job_name(self, job: Job, combo: Mapping[str, Any], contexts: Mapping[str, Any]) -> str:
        if job.name is None:
            return f"{job.id} ({', '.join(to_string(v) for v in combo.values())})" if combo else job.id
        try:
            return to_string(interpolate(str(job.name), {**contexts, "matrix": combo}))
        except ExpressionError:
            return str(job.name)

    def run_combination(self, job: Job, combo: Mapping[str, Any], strategy: Mapping[str, Any],
                        suffix: str) -> JobResult:
        import shutil

        workspace = self.settings.work_dir / "jobs" / f"{job.id}{suffix}"
        temp = Path(str(workspace) + ".temp")
        for directory in (workspace, temp):
            if directory.exists():
                shutil.rmtree(directory)
            directory.mkdir(parents=True)
        for variable in self.settings.fresh_dirs:
            (temp / variable.lower()).mkdir()
        contexts = {**self.base_contexts(job, workspace), "matrix": dict(combo), "strategy": dict(strategy)}
        name = self.job_name(job, combo, contexts)
        self.events.job_started(name)
        started = time.monotonic()
        state = _JobState(name=name, job_id=job.id, workspace=workspace, temp=temp,
                          log_dir=self.settings.work_dir / "logs" / f"{job.id}{suffix}",
                          id_token=may_mint_id_token(job.permissions))
        state.log_dir.mkdir(parents=True, exist_ok=True)
        steps: list[StepResult] = []
        detail = ""
        try:
            env: dict[str, str] = {}
            for key, value in {**self.workflow.env, **job.env}.items():
                env[key] = to_string(_evaluate_tree(value, {**contexts, "env": env}))
            state.env = env
            timeout = float(to_string(_evaluate_tree(job.timeout_minutes, contexts)) or 360) * 60
            job_continues = truthy(_evaluate_tree(job.continue_on_error, contexts))
        except ExpressionError as error:
            failed = JobResult(id=job.id, name=name, status="failure", matrix=combo, workspace=workspace,
                               detail=_message(error))
            self.events.job_finished(failed)
            return failed
        deadline = started + timeout
        if job.environment is not None:
            # A deployment environment's protection rules (required reviewers, wait timers) have no one to
            # ask here; its secrets are the run's (`RunSettings.secrets`).
            environment = job.environment.get("name") if isinstance(job.environment, Mapping) else job.environment
            steps.append(StepResult(label=f"environment {to_string(_evaluate_tree(environment, contexts))}",
                                    status="success", substituted="protection rules (required reviewers) not asked; "
                                    "its secrets are the rehearsal's"))
            self.events.step_finished(name, steps[-1])
        for step in job.steps:
            ran = self.run_step(job, step, contexts, state, deadline)
            steps.append(ran)
            self.events.step_finished(name, ran)
            if ran.status == "failure" and not state.continue_on_error:
                state.failed = True
                detail = detail or f"{ran.label}: {ran.detail}"
        outputs: dict[str, str] = {}
        step_contexts = {**contexts, "steps": state.steps, "env": state.env}
        for key, value in job.outputs.items():
            try:
                outputs[key] = to_string(interpolate(str(value), step_contexts))
            except ExpressionError:
                outputs[key] = ""
        status: Status = "failure" if state.failed else "success"
        if status == "failure" and job_continues:
            detail += " (continue-on-error: the run goes on, needs.<id>.result is success)"
        result = JobResult(id=job.id, name=name, status=status, matrix=combo, steps=tuple(steps), outputs=outputs,
                           workspace=workspace, seconds=time.monotonic() - started, detail=detail,
                           continue_on_error=job_continues)
        self.events.job_finished(result)
        return result

    # -- steps ------------------------------------------------------------------------------------------
    def run_step(self, job: Job, step: Step, contexts: Mapping[str, Any], state: _JobState,
                 deadline: float) -> StepResult:
        label = step.label()
        state.continue_on_error = False
        status_functions = {"success": lambda: not state.failed, "failure": lambda: state.failed,
                            "cancelled": lambda: False, "always": lambda: True}
        step_contexts = {**contexts, "steps": state.steps, "env": dict(state.env),
                         "job": {"status": "failure" if state.failed else "success"}}
        started = time.monotonic()
        try:
            if step.name:
                label = to_string(interpolate(step.name, step_contexts))
            if not condition(step.if_, step_contexts, status_functions):
                self._record(state, step, "skipped", {})
                return StepResult(label=label, status="skipped", detail="its if: is false"
                                  if state.failed is False else "an earlier step failed")
            env = dict(state.env)
            for key, value in step.env.items():
                env[key] = to_string(_evaluate_tree(value, {**step_contexts, "env": env}))
            state.continue_on_error = truthy(_evaluate_tree(step.continue_on_error, step_contexts))
            with_ = {k: to_string(_evaluate_tree(v, {**step_contexts, "env": env})) for k, v in step.with_.items()}
            if step.uses is not None:
                substituted, lines = self.run_action(job, step, with_, state)
                outputs: dict[str, str] = {}
                exit_code = None
            else:
                # Expressions inside `run:` are replaced before the shell sees the script, as on GitHub.
                script = to_string(_evaluate_tree(step.run or "", {**step_contexts, "env": env}))
                substituted, lines, outputs, exit_code = self.run_script(step, script, env, state, deadline)
            for line in lines:
                self.events.log(state.name, line)
        except (_StepFailure, ArtifactStepError, ExpressionError) as error:
            self._record(state, step, "failure", {}, continued=state.continue_on_error)
            code = error.exit_code if isinstance(error, _StepFailure) else None
            return StepResult(label=label, status="failure", exit_code=code, detail=_message(error),
                              seconds=time.monotonic() - started)
        self._record(state, step, "success", outputs)
        return StepResult(label=label, status="success", exit_code=exit_code, substituted=substituted,
                          detail="; ".join(lines[-1:]) if step.uses else "", seconds=time.monotonic() - started)

    @staticmethod
    def _record(state: _JobState, step: Step, outcome: str, outputs: Mapping[str, str], *,
                continued: bool = False) -> None:
        # `outcome` is before continue-on-error is applied, `conclusion` after: a failed step that may fail
        # has outcome failure and conclusion success (docs.github.com, contexts, `steps` context).
        if step.id:
            conclusion = "success" if outcome == "failure" and continued else outcome
            state.steps[step.id] = {"outputs": dict(outputs), "outcome": outcome, "conclusion": conclusion}

    def run_action(self, job: Job, step: Step, with_: Mapping[str, str],
                   state: _JobState) -> tuple[str | None, list[str]]:
        name = substitute.action_name(step)
        if name == "actions/checkout":
            if self.settings.commit is not None:
                count = substitute.export_commit(self.settings.source, self.settings.commit, state.workspace)
                lfs = "; LFS objects not fetched: pointers" if truthy(with_.get("lfs", "")) else ""
                return f"commit {self.settings.commit[:12]} as checkout writes it ({count} files{lfs})", []
            count = substitute.copy_work_tree(self.settings.source, state.workspace,
                                              leave_out=(self.settings.work_dir, *self.settings.leave_out))
            return f"a copy of the work tree {self.settings.source} (no commit to check out; {count} entries)", []
        if name == "actions/setup-python":
            return self.setup_python(with_, state), []
        if name == "actions/upload-artifact":
            return None, self.artifacts.upload(with_, workspace=state.workspace, job=job.id)
        if name == "actions/download-artifact":
            visible = {job.id, *self.workflow.ancestors(job.id)}
            return None, self.artifacts.download(with_, workspace=state.workspace, visible_jobs=visible)
        if name == "actions/attest":
            return "not run: no Sigstore or attestations API here (bundle-path is empty: no attestation shipped)", []
        raise _StepFailure(f"the rehearsal cannot run the action {step.uses!r}")

    def setup_python(self, with_: Mapping[str, str], state: _JobState) -> str:
        """setup-python fails on a version it cannot install; a known one is stood in for by this Python."""
        from hfrelease.ci.actions.python_versions import known

        version = with_.get("python-version", "")
        if not version and with_.get("python-version-file"):
            file = state.workspace / with_["python-version-file"]
            if not file.is_file():
                raise _StepFailure(f"The specified python version file at: {file} doesn't exist.")
            text = file.read_text(encoding="utf-8").strip()
            version = text.splitlines()[0] if text else ""
        judged = known(version, allow_prereleases=truthy(with_.get("allow-prereleases", ""))) if version else True
        if judged is False:
            raise _StepFailure(f"The version '{version}' with architecture 'x64' was not found for this operating "
                               "system (not a CPython release in setup-python's versions manifest)")
        state.path.insert(0, str(substitute.python_bin()))
        unjudged = "; this form of version not checked" if judged is None else ""
        return (f"the current Python ({substitute.python_bin() / 'python'}) put first on PATH, "
                f"not python-version {version or '?'}{unjudged}")

    def run_script(self, step: Step, script: str, env: Mapping[str, str], state: _JobState,
                   deadline: float) -> tuple[str | None, list[str], dict[str, str], int | None]:
        installs = substitute.pip_only(script)
        if installs:
            cwd = state.workspace / (step.working_directory or "")
            shell_env = {**self.default_env(state), **env}
            missing = [name for name in substitute.requirement_files(script)
                       if not (cwd / _expand(name, shell_env)).is_file()]
            if missing:
                raise _StepFailure("ERROR: Could not open requirements file: " + ", ".join(
                    f"{_expand(name, shell_env)} (not in the checked-out tree)" for name in missing), exit_code=1)
            from hfrelease.ci.install import step_install_problem

            problem = step_install_problem(script, shell_env, cwd)
            if problem is not None:  # pip would fail here on the runner: so does the rehearsal
                raise _StepFailure(f"ERROR: hfrelease cannot be installed: {problem}", exit_code=1)
            return f"not run: {substitute.environment_note()}", [], {}, None
        if installs is None:
            raise _StepFailure("the step mixes pip installs with other commands: the rehearsal cannot run it "
                               "without installing (put the installs in a step of their own)")
        step_id = uuid.uuid4().hex
        files = {name: state.temp / f"{name.lower()}_{step_id}" for name in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for path in files.values():
            path.touch()
        script_path = state.temp / f"{step_id}.sh"
        script_path.write_text(script, encoding="utf-8")
        shell = step.shell or None
        template = _SHELLS.get(shell, shell or "") if shell in _SHELLS else (shell or "")
        if "{0}" not in template:
            template += " {0}"
        argv = [part.replace("{0}", str(script_path)) for part in shlex.split(template)]
        process_env = {**self.settings.env, **self.default_env(state), **env,
                       **{name: str(path) for name, path in files.items()}}
        if state.path:
            process_env["PATH"] = os.pathsep.join([*state.path, process_env.get("PATH", "")])
        cwd = state.workspace / (step.working_directory or "")
        log_path = state.log_dir / f"{step.index:02d}.log"
        remaining = max(deadline - time.monotonic(), 1.0)
        code = self.execute(argv, cwd=cwd, env=process_env, log_path=log_path, timeout=remaining, job=state.name)
        summary = files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")
        if summary.strip():
            self.summaries.append(summary)
        state.env.update(_file_commands(files["GITHUB_ENV"]))
        state.path[:0] = [line for line in files["GITHUB_PATH"].read_text().splitlines() if line.strip()][::-1]
        outputs = _file_commands(files["GITHUB_OUTPUT"])
        if code != 0:
            raise _StepFailure(f"Process completed with exit code {code}. (log: {log_path})", exit_code=code)
        return None, [], outputs, code

    def default_env(self, state: _JobState) -> dict[str, str]:
        github = self.github(state.job_id, state.workspace)
        return {"CI": "true", "GITHUB_JOB": state.job_id, "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(state.workspace), "GITHUB_REF": github["ref"],
                "GITHUB_REF_NAME": github["ref_name"], "GITHUB_REF_TYPE": github["ref_type"],
                "GITHUB_EVENT_NAME": "push", "GITHUB_SHA": github["sha"], "GITHUB_RUN_ID": self.run_id,
                "GITHUB_REPOSITORY": github["repository"], "RUNNER_OS": "Linux", "RUNNER_TEMP": str(state.temp),
                **(self.settings.id_token if state.id_token else {}),
                **{variable: str(state.temp / variable.lower()) for variable in self.settings.fresh_dirs}}

    def execute(self, argv: list[str], *, cwd: Path, env: Mapping[str, str], log_path: Path, timeout: float,
                job: str) -> int:
        """Run one script, streaming its merged output to the log file and the events (secrets masked)."""
        masked = [s for s in self.settings.secrets.values() if len(s) >= 4]
        with log_path.open("w", encoding="utf-8") as log:
            process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, errors="replace", start_new_session=True)
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                _kill_group(process)

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                assert process.stdout is not None
                for raw in process.stdout:
                    line = raw.rstrip("\n")
                    for secret in masked:
                        line = line.replace(secret, "***")
                    log.write(line + "\n")
                    self.events.log(job, line)
                code = process.wait()
            except BaseException:
                _kill_group(process)
                raise
            finally:
                timer.cancel()
        if timed_out.is_set():
            raise _StepFailure(f"The job has exceeded the maximum execution time (timeout-minutes). (log: {log_path})")
        return code


@dataclass(kw_only=True)
class _JobState:
    name: str
    job_id: str
    workspace: Path
    temp: Path
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)
    steps: dict[str, Any] = field(default_factory=dict)
    failed: bool = False
    continue_on_error: bool = False
    id_token: bool = False


def may_mint_id_token(permissions: Any) -> bool:
    """Whether `permissions` (a job's, else its workflow's) grant `id-token: write`, as GitHub sets the OIDC
    request variables only then; none given means the default token's, which never has it."""
    if permissions == "write-all":
        return True
    return isinstance(permissions, Mapping) and permissions.get("id-token") == "write"


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def _expand(text: str, env: Mapping[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced from `env`, as the shell would before pip sees the path."""
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m.group(1) or m.group(2), ""), text)


def _evaluate_tree(value: Any, contexts: Mapping[str, Any]) -> Any:
    """A YAML value with every string's `${{ }}` evaluated (mappings and lists walked)."""
    if isinstance(value, str):
        return interpolate(value, contexts) if "${{" in value else value
    if isinstance(value, Mapping):
        return {k: _evaluate_tree(v, contexts) for k, v in value.items()}
    if isinstance(value, list):
        return [_evaluate_tree(v, contexts) for v in value]
    return value


def _message(error: Exception) -> str:
    problems = getattr(error, "problems", None)
    if problems:
        return "; ".join(f"{p.location}: {p.message}" for p in problems)
    return str(error)


def run_workflow(settings: RunSettings, events: RunEvents | None = None) -> RunResult:
    """Run every job of `settings.workflow`; never raises for a job's failure (read `RunResult.ok`)."""
    runner = _Runner(settings, events or NullRunEvents())
    return runner.run()
