"""GitHub Actions workflows for a family: `ci.yml` (check on every push) and `release.yml` (release on a tag).

Rendered from `templates/github/*.yml.j2` by a pure function, so `hfrelease init --github` and the
repository's own `.github/workflows/release.yml` come from one template and cannot drift apart. The
templates use `<< >>` / `<% %>` delimiters: `${{ }}` belongs to GitHub Actions and passes through.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from hfrelease.errors import ConfigError, ConfigProblem, UsageError
from hfrelease.manifest import Manifest
from hfrelease.resources import templates_dir

# Files written under the repository's `.github/`, each from `templates/github/<its name>.j2`.
GITHUB_FILES = ("workflows/ci.yml", "workflows/release.yml", "actionlint.yaml")


@dataclass(frozen=True, kw_only=True)
class ActionPin:
    """An action pinned to the full commit of a release tag (a tag can be moved; a commit cannot)."""

    sha: str
    version: str


# Looked up from each action's release tag; bump all four together and re-render (tests/ci checks the pins).
ACTIONS = {
    "checkout": ActionPin(sha="11bd71901bbe5b1630ceea73d27597364c9af683", version="v4.2.2"),
    "setup_python": ActionPin(sha="a26af69be951a213d495a4c3e4e4022e16d87065", version="v5.6.0"),
    "upload_artifact": ActionPin(sha="ea165f8d65b6e75b540449e92b4886f43607fa02", version="v4.6.2"),
    "download_artifact": ActionPin(sha="d3f86a106a0bac45b974a628896c90dbdf5c8093", version="v4.3.0"),
}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True, kw_only=True)
class WorkflowSpec:
    """What differs between families' workflows; the manifest supplies the rest."""

    manifest: str  # release.toml's path from the repository root, POSIX style
    runner_label: str = "gpu"  # label of the self-hosted GPU runners the eval matrix runs on
    environment: str = "release"  # the protected environment (required reviewers, HF_TOKEN secret)
    # What `pip install` installs hfrelease from: hfrelease is not on PyPI, so a pinned git+https URL, an https
    # wheel URL or a path in the repository (`hfrelease.preflight.install`); `init` fills it in when empty.
    install: str = ""
    vllm: str = "vllm"  # the vLLM requirement installed on the GPU runners
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
        path = PurePosixPath(self.manifest)
        # Every part is a plain name: the path is written into YAML scalars and shell lines.
        if path.is_absolute() or ".." in path.parts or not all(_NAME.match(part) for part in path.parts):
            found.append(ConfigProblem(location="manifest", message=f"{self.manifest!r} must be a path inside "
                                       "the repository"))
        return found


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
    }
    return {name: env.get_template(f"{PurePosixPath(name).name}.j2").render(**context) for name in GITHUB_FILES}


def repository_root(directory: Path) -> Path:
    """The git checkout `directory` is in (its nearest ancestor holding `.git`), else `directory` itself."""
    start = directory.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


def refuse_existing(root: Path) -> None:
    """Raise when `root` already has a file that `write_workflows` would overwrite."""
    existing = [p for p in (root / ".github" / name for name in GITHUB_FILES) if p.exists()]
    if existing:
        raise UsageError(f"{', '.join(map(str, existing))} already exist{'s' if len(existing) == 1 else ''}",
                         hint="Pass --force to overwrite, or move them aside and merge by hand.")


def write_workflows(
    manifest: Manifest, *, root: Path, spec: WorkflowSpec, force: bool = False
) -> list[Path]:
    """Write `GITHUB_FILES` under `root/.github/`; refuses to overwrite any of them unless `force`."""
    texts = render_workflows(manifest, spec)
    if not force:
        refuse_existing(root)
    written = []
    for name, text in texts.items():
        path = root / ".github" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
