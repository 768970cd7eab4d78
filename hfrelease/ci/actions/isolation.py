"""The release workflow's isolation rule: a job that holds a credential runs nothing untrusted.

Jobs on one runner are not isolated from each other (a self-hosted runner keeps its interpreter, its
caches and its processes' reach between jobs), and a process can read the environment of any other
process of its user (`/proc/<pid>/environ`). So the rule is per job, over the whole job:

- **credentialed**: the job reads a secret (`secrets.*`), meets a deployment environment (whose secrets it
  gets), or may mint an OIDC id token (`id-token: write`, or `write-all`);
- **untrusted**: the job runs code nobody locked or reviewed: vLLM and the vendors' remote code
  (`hfrelease eval`, `hfrelease demo`, `vllm`, `--trust-remote-code`), the serve plugin's build backend
  (`hfrelease bundle`, and `hfrelease publish` / `release --only publish` unless they publish a bundle made
  elsewhere with `--from-bundle`), or a pip install that is not locked: every install must be
  `--require-hashes` from a lock file, or `--no-deps` of one requirement pinned to a commit, a path of the
  repository, or a URL with its sha256.

A job may be one or the other, never both; `id-token: write` only beside the protected environment.
Two credentials are told apart (issue 28, part 6): the eval jobs' read-only, repo-scoped Hub token
(`READ_SECRETS`: it reads gated or private sources, it cannot write) may sit beside untrusted code, and
never in a publishing job, which gets its own write credential; any other secret is the publish job's.
Beyond each job: no secret in the workflow's own `env` (it would reach every job, declared or not), and no
self-hosted runner for a trigger a fork's pull request can fire (`UNTRUSTED_TRIGGERS`) unless the job's
`if:` keeps forks out.
tests/ci/actions/test_workflow_isolation.py applies the rule to every rendered workflow (the repository's and
`init --github`'s).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigProblem

# hfrelease commands that run untrusted code, and when they do.
_UNTRUSTED_COMMANDS = re.compile(r"\bhfrelease\s+(eval|demo|bundle)\b|(^|[\s;&|(])vllm\s|--trust-remote-code")
_PUBLISHING = re.compile(r"\bhfrelease\s+(publish\b|release\b[^\n]*--only\s+publish\b)")
_PIP_INSTALL = re.compile(r"(?:^|[\s;&|])(?:\S*python[0-9.]*\"?\s+-m\s+)?pip[0-9.]*\s+install\s+([^\n;&|]*)")
_PINNED = re.compile(
    r"^(\.|\./\S*|git\+https://\S+@[0-9a-f]{40}|https://\S+#sha256=[0-9a-f]{64})$"
)
_VARIABLE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_SECRET = re.compile(r"\bsecrets\.([A-Za-z_][A-Za-z0-9_]*)")
# The read-only Hub credential of the eval jobs (`hfrelease.files.sources.READ_TOKEN_VARIABLE` reads it there).
READ_SECRETS = frozenset({"HF_READ_TOKEN"})
# Events a fork's pull request (or anyone who can comment) can start: their jobs run code nobody reviewed.
UNTRUSTED_TRIGGERS = frozenset({
    "pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment",
    "issue_comment", "discussion", "discussion_comment", "workflow_run",
})
# A job condition that keeps a fork's pull request out (the head repository must be this one).
_FORKS_OUT = re.compile(r"head\.repo\.fork\s*==\s*false|head\.repo\.full_name\s*==\s*github\.repository")


@dataclass(frozen=True, kw_only=True)
class IsolationProblem:
    job: str
    message: str

    def render(self) -> str:
        return f"job {self.job}: {self.message}"


def _mints_id_tokens(job: Mapping[str, Any]) -> bool:
    permissions = job.get("permissions")
    return permissions == "write-all" or (isinstance(permissions, Mapping) and permissions.get("id-token") == "write")


def _secrets(value: object) -> set[str]:
    return set(_SECRET.findall(repr(value)))


def _credentials(job: Mapping[str, Any]) -> list[str]:
    found = []
    written = sorted(_secrets(job) - READ_SECRETS)
    if written:
        found.append(f"reads a secret ({', '.join(written)})")
    if job.get("environment") is not None:
        found.append("meets a deployment environment (and its secrets)")
    if _mints_id_tokens(job):
        found.append("may mint an OIDC id token")
    return found


def _resolve(word: str, env: Mapping[str, str]) -> str:
    match = _VARIABLE.match(word)
    return env.get(match.group(1), word) if match else word


def _unlocked_install(arguments: str, env: Mapping[str, str]) -> str | None:
    """Why a pip install's arguments are not a locked install, or None when they are."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        return f"pip install {arguments.strip()} (cannot be read)"
    if "--require-hashes" in words and ("-r" in words or "--requirement" in words):
        return None
    requirements = [w for w in words if not w.startswith("-")]
    if "--no-deps" in words and len(requirements) == 1 and _PINNED.match(_resolve(requirements[0], env)):
        return None
    return f"pip install {arguments.strip()} is not locked (--require-hashes -r LOCK, or --no-deps of a pinned spec)"


def _publishes(job: Mapping[str, Any]) -> bool:
    """The job releases: it publishes, meets a deployment environment or may mint an id token."""
    scripts = [step.get("run") for step in job.get("steps") or [] if isinstance(step, Mapping)]
    return (job.get("environment") is not None or _mints_id_tokens(job)
            or any(isinstance(s, str) and _PUBLISHING.search(s) for s in scripts))


def _triggers(workflow: Mapping[Any, Any]) -> set[str]:
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on}
    return {str(t) for t in on} if isinstance(on, Mapping | list) else set()


def _self_hosted(job: Mapping[str, Any]) -> bool:
    runs_on = job.get("runs-on")
    labels = runs_on.get("labels") if isinstance(runs_on, Mapping) else runs_on
    return "self-hosted" in ([labels] if isinstance(labels, str) else list(labels or []))


def _workflow_problems(workflow: Mapping[str, Any]) -> list[IsolationProblem]:
    """What reaches past one job: secrets in the workflow's env, self-hosted jobs a fork can start."""
    problems = [IsolationProblem(job="(workflow env)", message=f"secrets.{name} in the workflow's env reaches "
                                 "every job: declare it in the env of the one step that needs it")
                for name in sorted(_secrets(workflow.get("env") or {}))]
    untrusted = sorted(_triggers(workflow) & UNTRUSTED_TRIGGERS)
    for job_id, job in (workflow.get("jobs") or {}).items():
        if untrusted and isinstance(job, Mapping) and _self_hosted(job) and not _FORKS_OUT.search(
                str(job.get("if", ""))):
            problems.append(IsolationProblem(job=job_id, message=(
                f"runs on a self-hosted runner on {', '.join(untrusted)}, which a fork's pull request can "
                "trigger: its code would run on the GPU pool (keep forks out with `if: "
                "github.event.pull_request.head.repo.fork == false`, or run it on tags and pushes only)")))
    return problems


def _untrusted(job: Mapping[str, Any], workflow_env: Mapping[str, Any]) -> list[str]:
    found = []
    job_env = {**workflow_env, **(job.get("env") or {})}
    for step in job.get("steps") or []:
        script = step.get("run")
        if not isinstance(script, str):
            continue
        env = {str(k): str(v) for k, v in {**job_env, **(step.get("env") or {})}.items()}
        for line in script.splitlines():
            if line.strip().startswith("#"):
                continue
            command = _UNTRUSTED_COMMANDS.search(line)
            if command:
                found.append(f"runs {command.group(0).strip()!r} (vLLM, remote code or a plugin build)")
            publishing = _PUBLISHING.search(line)
            if publishing and "--from-bundle" not in line:
                found.append(f"runs {publishing.group(0).strip()!r} without --from-bundle (it would build the plugin)")
            for install in _PIP_INSTALL.finditer(line):
                why = _unlocked_install(install.group(1), env)
                if why:
                    found.append(why)
    return found


def isolation_problems(workflow: Mapping[str, Any]) -> list[IsolationProblem]:
    """Every job of a parsed workflow that breaks the rule above (none: the workflow keeps it)."""
    problems = _workflow_problems(workflow)
    workflow_env = workflow.get("env") or {}
    for job_id, job in (workflow.get("jobs") or {}).items():
        if not isinstance(job, Mapping):
            continue
        credentials = _credentials(job)
        if _mints_id_tokens(job) and job.get("environment") is None:
            problems.append(IsolationProblem(job=job_id, message="id-token: write outside a protected environment"))
        read = sorted(_secrets(job) & READ_SECRETS)
        if read and _publishes(job):
            problems.append(IsolationProblem(job=job_id, message=(
                f"publishes and reads {', '.join(read)}, the eval jobs' read-only credential: it must never reach "
                "the publish job's scope (publish uses the environment's HF_TOKEN or trusted publishing)")))
        if not credentials:
            continue
        for reason in _untrusted(job, workflow_env):
            problems.append(IsolationProblem(job=job_id, message=f"{' and '.join(credentials)}, and {reason}"))
    return problems


def workflow_problems(root: Path) -> list[ConfigProblem]:
    """The rule over every workflow under `root/.github/workflows/` (a family's own, not only the generated
    one), each problem at its file and job; what cannot be parsed is GitHub's to report, not ours."""
    import yaml

    directory = root / ".github" / "workflows"
    paths = sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")]) if directory.is_dir() else []
    found = []
    for path in paths:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(data, Mapping):
            found += [ConfigProblem(location=f".github/workflows/{path.name} jobs.{p.job}",
                                    message=f"isolation rule: {p.message}") for p in isolation_problems(data)]
    return found


def check_workflow_text(text: str) -> list[IsolationProblem]:
    """`isolation_problems` of a workflow file's text."""
    import yaml

    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        return []
    return isolation_problems(data)
