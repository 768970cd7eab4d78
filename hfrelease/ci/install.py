"""Where a workflow installs hfrelease from: a line that resolves on a fresh runner, or a problem.

hfrelease is not published on PyPI, so `pip install hfrelease==X` fails on every runner. What does resolve
there: a git URL over https pinned to a commit (`git+https://github.com/OWNER/hfrelease@<sha>`), an https
URL of a wheel or sdist, or a path inside the repository being checked out (`.` when the repository is
hfrelease itself, or a vendored copy). `hfrelease init --github` writes one of those (`default_install`),
and `hfrelease check` reads every workflow of the repository for the line it installs from.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hfrelease import shell
from hfrelease.errors import ConfigProblem

DISTRIBUTION = "hfrelease"
INSTALL_ENV = "HFRELEASE"  # the variable templates/github/*.j2 install from
_INDEX_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
_INDEX_FLAGS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_name(directory: Path) -> str | None:
    """`[project].name` of directory/pyproject.toml, when it is readable and names one."""
    try:
        data = tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = data.get("project", {}).get("name")
    return name if isinstance(name, str) else None


def install_problem(spec: str, root: Path, *, index: bool = False) -> str | None:
    """Why `pip install <spec>` run at the root of a checkout of `root` cannot install hfrelease, or None.

    `index`: the workflow names a package index of its own (`--index-url`, `PIP_INDEX_URL`), which may
    serve hfrelease.
    """
    text = spec.strip()
    if " @ " in text:  # PEP 508 direct reference: name @ url
        text = text.split(" @ ", 1)[1].strip()
    if not text:
        return "the install line is empty"
    if text.startswith(("git+", "https://", "http://", "file:")):
        return _url_problem(spec, text)
    name = _NAME.match(text)
    if name is None or text.startswith((".", "/", "~")) or "/" in text or text.endswith((".whl", ".tar.gz", ".zip")):
        return _path_problem(spec, text.split("[", 1)[0], root)
    if _normalized(name.group(1)) == DISTRIBUTION and not index:
        return f"{spec!r} asks PyPI for hfrelease, which is not published there: pip finds no such distribution"
    return None


def _url_problem(spec: str, url: str) -> str | None:
    if url.startswith("git+") and not url.startswith("git+https://"):
        return f"{spec!r} is not reachable from a runner: use git+https:// (ssh needs a key, file:// is a path on " \
               "this machine)"
    if url.startswith(("http://", "file:")):
        return f"{spec!r} is a location on this machine or a plain-http URL: a runner cannot install from it"
    return None


def _path_problem(spec: str, relative: str, root: Path) -> str | None:
    if Path(relative).is_absolute() or relative.startswith("~"):
        return f"{spec!r} is a path on this machine; a runner has only the checkout: give a path inside the repository"
    target = root / relative
    problem: str | None = None
    if target.is_file():
        return None
    if not target.is_dir():
        problem = f"{spec!r} does not exist in the repository ({root})"
    elif not (target / "pyproject.toml").is_file() and not (target / "setup.py").is_file():
        problem = f"{spec!r} is not a Python project (no pyproject.toml or setup.py in {target})"
    else:
        found = project_name(target)
        if found is not None and _normalized(found) != DISTRIBUTION:
            problem = f"{spec!r} installs {found!r}, not hfrelease"
    return problem


def step_install_problem(run: str, env: Mapping[str, str], workspace: Path) -> str | None:
    """Why one `run:` step's install of hfrelease would fail on a runner whose checkout is `workspace`, or None.

    For the rehearsal, which substitutes pip installs by the current environment but must still fail where
    pip would: the spec (`$HFRELEASE` expanded from the step's environment, or a literal hfrelease requirement)
    is judged as `check` judges a workflow's line, except that an absolute path is accepted when it holds
    hfrelease on this machine (the rehearsal's own workflow installs from the local checkout). A git or https
    URL is not fetched (no network is assumed): it is judged by its form only.
    """
    for arg, named_index in _pip_targets(run):
        spec = _hfrelease_spec(arg, env)
        if spec is None:
            continue
        index = named_index or any(env.get(name) for name in _INDEX_ENV)
        local = Path(spec.split("[", 1)[0].strip())
        if local.is_absolute():
            if _normalized(project_name(local) or "") == DISTRIBUTION:
                continue
            return f"{spec!r} does not hold hfrelease on this machine (no pyproject.toml naming it)"
        problem = install_problem(spec, workspace, index=index)
        if problem is not None:
            return problem
    return None


def default_install(root: Path, *, runner: shell.Runner = subprocess.run) -> str | None:
    """An install line for a new family's workflows that resolves, or None when none is known.

    In order: `.` when the repository is hfrelease's own source tree; the git commit pip installed this
    hfrelease from (`direct_url.json`); the commit checked out where this hfrelease is installed from, when
    that checkout has an https `origin` (the commit must be pushed there).
    """
    import importlib.metadata

    if _normalized(project_name(root) or "") == DISTRIBUTION:
        return "."
    try:
        direct = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    data: Mapping[str, Any] = json.loads(direct) if direct else {}
    url = data.get("url")
    vcs = data.get("vcs_info")
    if isinstance(vcs, Mapping) and vcs.get("vcs") == "git" and isinstance(url, str) and url.startswith("https://"):
        commit = vcs.get("commit_id")
        return f"git+{url}@{commit}" if isinstance(commit, str) else None
    if isinstance(url, str) and url.startswith("file://"):
        from urllib.request import url2pathname

        return _checkout_install(Path(url2pathname(url[len("file://"):])), runner)
    return None


def rehearsal_install(root: Path, *, runner: shell.Runner = subprocess.run) -> str:
    """`default_install`, else the directory this hfrelease is installed from on this machine.

    For a workflow the rehearsal runs here (`hfrelease release --write-workflow`), whose pip installs are
    substituted by the current environment; `hfrelease check` reports such a line in a repository's workflows.
    """
    import importlib.metadata

    found = default_install(root, runner=runner)
    if found is not None:
        return found
    try:
        direct = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json") or "{}"
    except importlib.metadata.PackageNotFoundError:
        direct = "{}"
    url = json.loads(direct).get("url")
    if isinstance(url, str) and url.startswith("file://"):
        from urllib.request import url2pathname

        return url2pathname(url[len("file://"):])
    return str(Path(__file__).resolve().parents[2])


def _checkout_install(checkout: Path, runner: shell.Runner) -> str | None:
    def git(*args: str) -> str | None:
        try:
            done = runner(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None

    origin, head = git("remote", "get-url", "origin"), git("rev-parse", "HEAD")
    if origin is None or head is None:
        return None
    ssh = re.match(r"^git@([^:/]+):(.+)$", origin)
    if ssh:  # git@github.com:owner/repo.git -> https: a runner has no ssh key for it
        origin = f"https://{ssh.group(1)}/{ssh.group(2)}"
    return f"git+{origin}@{head}" if origin.startswith("https://") else None


def _hfrelease_spec(arg: str, env: Mapping[str, Any]) -> str | None:
    """What a `pip install` argument installs hfrelease from: `$HFRELEASE` read from `env` (the variable the
    templates install from), or a literal hfrelease requirement; None for any other argument."""
    variable = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", arg)
    if variable:
        return str(env.get(INSTALL_ENV, "")) if variable.group(1) == INSTALL_ENV else None
    return arg if _normalized(_requirement_name(arg)) == DISTRIBUTION else None


def _requirement_name(arg: str) -> str:
    found = _NAME.match(arg)
    return found.group(1) if found else ""


def _env(table: Mapping[str, Any]) -> dict[str, Any]:
    env = table.get("env")
    return dict(env) if isinstance(env, Mapping) else {}


def _runs(data: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(location, env in force, step) for every step of every job of a workflow."""
    jobs = data.get("jobs")
    for job_id, job in (jobs.items() if isinstance(jobs, Mapping) else []):
        if not isinstance(job, Mapping):
            continue
        job_env = {**_env(data), **_env(job)}
        for pos, step in enumerate(job.get("steps") or []):
            if isinstance(step, Mapping):
                yield f"jobs.{job_id}.steps[{pos}]", {**job_env, **_env(step)}, step


def _pip_targets(run: str) -> Iterator[tuple[str, bool]]:
    """(argument, whether the command names an index) for each `pip install` argument of a run script."""
    for line in run.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for pos in range(len(words) - 1):
            if words[pos] == "pip" and words[pos + 1] == "install":
                args = words[pos + 2:]
                index = any(a.split("=", 1)[0] in _INDEX_FLAGS for a in args)
                yield from ((a, index) for a in args if not a.startswith("-"))


def workflow_install_problems(root: Path) -> list[ConfigProblem]:
    """Every install of hfrelease in `root/.github/workflows/*.yml` that cannot resolve on a runner."""
    import yaml

    problems: list[ConfigProblem] = []
    directory = root / ".github" / "workflows"
    paths = sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")]) if directory.is_dir() else []
    for path in paths:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # not ours to lint: GitHub reports a broken workflow itself
        if not isinstance(data, Mapping):
            continue
        seen: set[str] = set()
        for location, env, step in _runs(data):
            run = step.get("run")
            if not isinstance(run, str):
                continue
            index = any(name in env for name in _INDEX_ENV)
            for arg, named_index in _pip_targets(run):
                if arg.startswith("$") and not isinstance(env.get(INSTALL_ENV), str):
                    continue
                found = _hfrelease_spec(arg, env)
                if found is None:
                    continue
                spec = found
                where = f"{location}.env.{INSTALL_ENV}" if arg.startswith("$") else f"{location}.run"
                problem = install_problem(spec, root, index=index or named_index)
                if problem is not None and spec not in seen:
                    seen.add(spec)
                    problems.append(ConfigProblem(
                        location=f".github/workflows/{path.name} {where}",
                        message=f"{problem} (hfrelease installs from git+https://...@<commit>, an https wheel URL, "
                                "or a path in the repository; `hfrelease init --github --install SPEC`)"))
    return problems
