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
tests/actions/test_workflow_isolation.py applies the rule to every rendered workflow (the repository's and
`init --github`'s).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# hfrelease commands that run untrusted code, and when they do.
_UNTRUSTED_COMMANDS = re.compile(r"\bhfrelease\s+(eval|demo|bundle)\b|(^|[\s;&|(])vllm\s|--trust-remote-code")
_PUBLISHING = re.compile(r"\bhfrelease\s+(publish\b|release\b[^\n]*--only\s+publish\b)")
_PIP_INSTALL = re.compile(r"(?:^|[\s;&|])(?:\S*python[0-9.]*\"?\s+-m\s+)?pip[0-9.]*\s+install\s+([^\n;&|]*)")
_PINNED = re.compile(
    r"^(\.|\./\S*|git\+https://\S+@[0-9a-f]{40}|https://\S+#sha256=[0-9a-f]{64})$"
)
_VARIABLE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


@dataclass(frozen=True, kw_only=True)
class IsolationProblem:
    job: str
    message: str

    def render(self) -> str:
        return f"job {self.job}: {self.message}"


def _mints_id_tokens(job: Mapping[str, Any]) -> bool:
    permissions = job.get("permissions")
    return permissions == "write-all" or (isinstance(permissions, Mapping) and permissions.get("id-token") == "write")


def _credentials(job: Mapping[str, Any]) -> list[str]:
    found = []
    if "secrets." in repr(job):
        found.append("reads a secret")
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
    problems = []
    workflow_env = workflow.get("env") or {}
    for job_id, job in (workflow.get("jobs") or {}).items():
        credentials = _credentials(job)
        if _mints_id_tokens(job) and job.get("environment") is None:
            problems.append(IsolationProblem(job=job_id, message="id-token: write outside a protected environment"))
        if not credentials:
            continue
        for reason in _untrusted(job, workflow_env):
            problems.append(IsolationProblem(job=job_id, message=f"{' and '.join(credentials)}, and {reason}"))
    return problems


def check_workflow_text(text: str) -> list[IsolationProblem]:
    """`isolation_problems` of a workflow file's text."""
    import yaml

    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        return []
    return isolation_problems(data)
