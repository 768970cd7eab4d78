"""GitHub Actions workflows for a family: `ci.yml` (check on every push) and `release.yml` (release on a tag).

Rendered from `templates/github/*.yml.j2` by a pure function, so `hfrelease init --github` and the
repository's own `.github/workflows/release.yml` come from one template and cannot drift apart. The
templates use `<< >>` / `<% %>` delimiters: `${{ }}` belongs to GitHub Actions and passes through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from hfrelease.errors import ConfigError, ConfigProblem, UsageError
from hfrelease.manifest import Manifest
from hfrelease.resources import templates_dir

# Files written under the repository's `.github/`, each from `templates/github/<its name>.j2`.
GITHUB_FILES = ("workflows/ci.yml", "workflows/release.yml", "actionlint.yaml", "dependabot.yml")


@dataclass(frozen=True, kw_only=True)
class ActionPin:
    """An action pinned to the full commit of a release tag (a tag can be moved; a commit cannot)."""

    sha: str
    version: str


# Each the commit of the action's newest release tag of its current major (Node 24 runtimes; the Node 20
# majors are gone from the runners). Dependabot (.github/dependabot.yml) proposes newer ones for the
# repository's workflows; bump these with them and re-render (tests/ci checks the pins).
# actions/attest is what actions/attest-build-provenance wraps since its v4 (its README: new workflows use it).
ACTIONS = {
    "checkout": ActionPin(sha="3d3c42e5aac5ba805825da76410c181273ba90b1", version="v7.0.1"),
    "setup_python": ActionPin(sha="5fda3b95a4ea91299a34e894583c3862153e4b97", version="v7.0.0"),
    "upload_artifact": ActionPin(sha="bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", version="v7.0.0"),
    "download_artifact": ActionPin(sha="3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", version="v8.0.1"),
    "attest": ActionPin(sha="1e69f48acb82d1966a394da916b4c1698aa569d6", version="v4.2.2"),
}

# The lock files (pip requirements with hashes, `scripts/lock` regenerates them) shipped with hfrelease:
# one for the GitHub-hosted and CPU-only jobs, one for the CUDA runners (adds vLLM). `init --github` copies
# them into the new repository under LOCK_DIR; hfrelease's own workflow uses them where they are.
LOCK_FILES = ("release-cpu.txt", "release-cuda.txt")
LOCK_DIR = ".github/locks"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_PATH_PART = re.compile(r"^\.?[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # `.github` too


@dataclass(frozen=True, kw_only=True)
class WorkflowSpec:
    """What differs between families' workflows; the manifest supplies the rest."""

    manifest: str  # release.toml's path from the repository root, POSIX style
    runner_label: str = "gpu"  # label of the self-hosted GPU runners the eval matrix runs on
    environment: str = "release"  # the protected environment (required reviewers, HF_TOKEN secret)
    # What `pip install` installs hfrelease from: hfrelease is not on PyPI, so a pinned git+https URL, an https
    # wheel URL or a path in the repository (`hfrelease.ci.install`); `init` fills it in when empty.
    install: str = ""
    lock_dir: str = LOCK_DIR  # where the workflows find LOCK_FILES, from the repository root
    python_version: str = "3.11"
    eval_timeout_minutes: int = 360

    def problems(self) -> list[ConfigProblem]:
        found = []
        for option, value in (("--runner-label", self.runner_label), ("--environment", self.environment)):
            if not _NAME.match(value):
                found.append(ConfigProblem(location=option, message=f"{value!r} is not a plain name "
                                           "(letters, digits, '.', '_' or '-', at most 100)"))
        if not self.install.strip():
            found.append(ConfigProblem(location="--install", message="no install line for hfrelease: give "
                                       "git+https://.../hfrelease@<commit>, an https wheel URL or a path in the "
                                       "repository"))
        for location, value in (("manifest", self.manifest), ("lock_dir", self.lock_dir)):
            path = PurePosixPath(value)
            # Every part is a plain name: the path is written into YAML scalars and shell lines.
            if path.is_absolute() or ".." in path.parts or not all(_PATH_PART.match(part) for part in path.parts):
                found.append(ConfigProblem(location=location, message=f"{value!r} must be a path inside "
                                           "the repository"))
        return found


def lock_dir_for(root: Path) -> str:
    """Where `root`'s workflows find the lock files: hfrelease's own checkout keeps them as package data."""
    own = ((root / "hfrelease" / "release" / "workflows.py").is_file()
           and (root / "templates" / "locks" / LOCK_FILES[0]).is_file())
    return "templates/locks" if own else LOCK_DIR


def tag_glob(manifest: Manifest) -> str:
    """The tags that start a release: `[publish].tag` with the version left open (`v{version}` -> `v*`)."""
    return manifest.publish.tag.replace("{version}", "*").replace("{family}", manifest.family.name)


def render_workflows(manifest: Manifest, spec: WorkflowSpec) -> dict[str, str]:
    """The text of each file of `GITHUB_FILES`, by its path under `.github/` (a pure function of the arguments)."""
    import jinja2

    problems = spec.problems()
    if problems:
        raise ConfigError("hfrelease init --github", problems)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "github"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - YAML, not HTML; free-form values go through `tojson`
        variable_start_string="<<", variable_end_string=">>",
        block_start_string="<%", block_end_string="%>",
        comment_start_string="<#", comment_end_string="#>",
    )
    family_dir = PurePosixPath(spec.manifest).parent
    context = {
        **asdict(spec),
        "family": manifest.family.name,
        "tag_glob": tag_glob(manifest),
        "family_dir": family_dir.as_posix(),
        "results_dir": (family_dir / "results").as_posix(),
        "actions": {name: asdict(pin) for name, pin in ACTIONS.items()},
        "lock_cpu": f"{spec.lock_dir}/{LOCK_FILES[0]}",
        "lock_cuda": f"{spec.lock_dir}/{LOCK_FILES[1]}",
    }
    return {name: env.get_template(f"{PurePosixPath(name).name}.j2").render(**context) for name in GITHUB_FILES}


def repository_root(directory: Path) -> Path:
    """The git checkout `directory` is in (its nearest ancestor holding `.git`), else `directory` itself."""
    start = directory.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


def _written_paths(root: Path) -> list[Path]:
    return [root / ".github" / name for name in GITHUB_FILES] + [root / LOCK_DIR / name for name in LOCK_FILES]


def refuse_existing(root: Path) -> None:
    """Raise when `root` already has a file that `write_workflows` would overwrite."""
    existing = [p for p in _written_paths(root) if p.exists()]
    if existing:
        raise UsageError(f"{', '.join(map(str, existing))} already exist{'s' if len(existing) == 1 else ''}",
                         hint="Pass --force to overwrite, or move them aside and merge by hand.")


def write_workflows(
    manifest: Manifest, *, root: Path, spec: WorkflowSpec, force: bool = False
) -> list[Path]:
    """Write `GITHUB_FILES` under `root/.github/` and the lock files the workflows install from under
    `root/<spec.lock_dir>/`; refuses to overwrite any of them unless `force`."""
    texts = {root / ".github" / name: text for name, text in render_workflows(manifest, spec).items()}
    locks = templates_dir() / "locks"
    texts |= {root / spec.lock_dir / name: (locks / name).read_text(encoding="utf-8") for name in LOCK_FILES}
    if not force:
        refuse_existing(root)
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(texts)


def repository_settings(
    spec: WorkflowSpec, *, repos: Sequence[str], github_repository: str = "OWNER/REPO"
) -> list[str]:
    """What a maintainer sets by hand before the first tag (the workflows cannot set it), one step a line."""
    publishers = ", ".join(repos) if repos else "the family's repos"
    return [
        f"GitHub: Settings > Environments > New environment {spec.environment!r}: add required reviewers (they "
        "approve each release's publish job), tick 'Prevent self-review', and limit its deployment branches and "
        "tags to the release tags.",
        "GitHub: Settings > Rules > Rulesets > New tag ruleset for the release tags (e.g. v*): restrict creation, "
        "update and deletion to the maintainers, so only they can start a release and no tag moves afterwards.",
        f"GitHub: self-hosted runners labelled {spec.runner_label!r} for the eval, merge and bundle jobs, "
        "ephemeral (./config.sh --ephemeral: one job each), with no credentials on the machine.",
        f"Hugging Face: on each of {publishers}: Settings > Trusted publishers > add GitHub Actions, repository "
        f"{github_repository}, workflow release.yml, environment {spec.environment!r}. Each repo gets its own "
        "short-lived token from the publish job; no long-lived secret is needed.",
        f"Fallback (a repo's first release, before it exists to trust a publisher, or the collection): an "
        f"HF_TOKEN secret in the environment {spec.environment!r} only (never a repository secret), a "
        "fine-grained token with write access to the family's repos. Remove it once trusted publishing works.",
        "GitHub: Settings > Code security > Dependabot: enable version updates (.github/dependabot.yml keeps the "
        "action pins and the lock files current).",
    ]


# A family that serves suffix decoding needs arctic-inference on its eval runners (`prerequisites`).
SUFFIX_RUNNERS = (
    "Suffix decoding (a [[speculative]] method = \"suffix\") needs arctic-inference 0.1.1 on the eval runners, "
    "which the locks do not install: the package index has only its source distribution (a C++ extension), so "
    "add a step that builds it as hfrelease's scripts/setup does, or the eval jobs stop at check (exit 3).")


def prerequisites(manifest: Manifest) -> tuple[str, ...]:
    """`PREREQUISITES`, and what this family's own configs add to them (`SUFFIX_RUNNERS`)."""
    methods = {s.method for s in manifest.speculative}
    return PREREQUISITES + ((SUFFIX_RUNNERS,) if "suffix" in methods else ())


# What the tag-push release needs and cannot check itself (issue 28, part 5): `init --github` prints these,
# `check` notes them for a repository with a release workflow.
PREREQUISITES = (
    "Attestations (actions/attest) need a public repository, or GitHub Enterprise Cloud for a private one: "
    "elsewhere the attest step fails and nothing is published.",
    "actions/setup-python needs a runner OS it has builds for (GitHub-hosted Ubuntu, or a self-hosted runner "
    "with a supported Linux); otherwise install Python on the runner and drop that step.",
    "The CUDA lock (release-cuda.txt) installs CUDA 13 wheels: the GPU runners need a driver for CUDA 13.",
    "The eval jobs have no Hub token: a gated or private source fails unless the repository has an "
    "HF_READ_TOKEN secret, a fine-grained read-only token scoped to those source repos (never HF_TOKEN).",
    "A push of more than three tags at once starts no workflow (GitHub's events-that-trigger-workflows docs, "
    "push: 'Events will not be created for tags when more than three tags are pushed at once'): push release "
    "tags one at a time.",
    "A fork's pull request can run a workflow on the self-hosted GPU runners: Settings > Actions > General > "
    "'Require approval for all outside collaborators', and no self-hosted job on pull_request triggers.",
)
