"""`hfrelease init`: scaffold a new family directory with a commented release.toml that `check` accepts."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from hfrelease.ci.workflows import WorkflowSpec, refuse_existing, repository_root, write_workflows
from hfrelease.errors import ConfigProblem, UsageError
from hfrelease.manifest import MANIFEST_NAME, load_manifest
from hfrelease.manifest.fields import repo_id_problem
from hfrelease.resources import templates_dir

_SAMPLE_PROMPTS = [
    "Explain what a model card is in two sentences.",
    "Write a haiku about quantization.",
    "List three things to check before publishing a model.",
    "What is speculative decoding? Answer briefly.",
]


@dataclass(frozen=True, kw_only=True)
class FamilySpec:
    """What `hfrelease init` asks for; everything else in the scaffold is a commented default."""

    name: str
    base_model: str
    owner: str
    display_name: str | None = None
    license: str = "apache-2.0"
    languages: tuple[str, ...] = ("en",)
    author: str | None = None
    year: int = field(default_factory=lambda: dt.date.today().year)


def _toml(value: object) -> str:
    # JSON strings and arrays of strings are valid TOML basic strings and arrays.
    return json.dumps(value, ensure_ascii=False)


def render_manifest(spec: FamilySpec) -> str:
    """The scaffold's release.toml text (a pure function of `spec`)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - TOML, not HTML; every value goes through the `toml` filter
    )
    env.filters["toml"] = _toml
    display = spec.display_name or spec.base_model.split("/")[-1]
    key = re.sub(r"[^a-z0-9]", "", spec.owner.lower()) + str(spec.year) + re.sub(r"[^a-z0-9]", "", spec.name)
    return env.get_template("init/release.toml.j2").render(
        name=spec.name,
        display_name=display,
        base_model=spec.base_model,
        owner=spec.owner,
        license=spec.license,
        languages=list(spec.languages),
        author=spec.author or spec.owner,
        citation_key=key,
        year=spec.year,
    )


def _with_install(github: WorkflowSpec, root: Path) -> tuple[WorkflowSpec, list[ConfigProblem]]:
    """`github` with an install line that resolves on a runner: the one given (checked), else one found."""
    from hfrelease.ci.install import default_install, install_problem

    if github.install.strip():
        problem = install_problem(github.install, root)
        return github, [ConfigProblem(location="--install", message=problem)] if problem else []
    found = default_install(root)
    if found is None:
        return github, [ConfigProblem(
            location="--install",
            message="hfrelease is not on PyPI and this installation did not come from a public git commit: pass "
                    "--install git+https://github.com/OWNER/hfrelease@<commit> (or an https wheel URL, or a path "
                    "in this repository) so the workflows can install it")]
    return replace(github, install=found), []


# A family directory's name, and with --github every directory from the repository's root down to it,
# lands in YAML (the workflows' MANIFEST and artifact paths), in shell lines and in commands people copy:
# plain names only, so `dir${{ github.token }}` cannot become a template expression and a newline cannot
# end a YAML scalar.
_DIR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def directory_problems(directory: Path, relative_manifest: str = "") -> list[ConfigProblem]:
    """Why `directory` (and, with --github, its path from the repository root) is not safe to scaffold."""
    names = [directory.resolve().name]
    if relative_manifest:
        names += list(Path(relative_manifest).parts[:-1])
    bad = [name for name in dict.fromkeys(names) if not _DIR_NAME.match(name)]
    return [ConfigProblem(location="DIRECTORY", message=f"{name!r} is not a plain directory name (letters, digits, "
                          "'.', '_' or '-', at most 100): it is written into YAML workflows and shell commands")
            for name in bad]


def _usage_error(problems: list[ConfigProblem]) -> UsageError:
    """What init says when its arguments cannot be used: every problem at once, exit 2 (nothing was written)."""
    count = len(problems)
    lines = "\n".join(f"  - {p.render()}" for p in problems)
    return UsageError(f"hfrelease init: {count} problem{'s' if count != 1 else ''} in the arguments:\n{lines}",
                      hint="Fix the arguments named above and run `hfrelease init` again; nothing was written.")


def scaffold_family(
    directory: Path, spec: FamilySpec, *, force: bool = False, github: WorkflowSpec | None = None
) -> list[Path]:
    """Create `directory` with release.toml, sections/, results/, prompts/ and checkpoints/; return the files.

    Refuses (`UsageError`, exit 2, every problem at once) bad arguments, `github` outside a git repository, and
    to overwrite an existing release.toml unless `force`. The written manifest is loaded back
    before returning, so a scaffold that `hfrelease check` would reject is never left behind. With
    `github`, also the GitHub Actions workflows at the repository's root (`hfrelease.ci.workflows`); its
    `manifest` is replaced by the new release.toml's path from that root.
    """
    problems = []
    if not re.match(r"^[a-z0-9][a-z0-9._-]{0,63}$", spec.name):
        problems.append(ConfigProblem(location="--name", message=f"{spec.name!r} is not a valid family id "
                                      "(lowercase letters, digits, '.', '_' or '-')"))
    problem = repo_id_problem(spec.base_model)
    if problem:
        problems.append(ConfigProblem(location="--base-model", message=problem))
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", spec.owner):
        problems.append(
            ConfigProblem(location="--owner", message=f"{spec.owner!r} is not a Hub user or organization name")
        )
    root = repository_root(directory)
    if github is not None and not (root / ".git").exists():
        # Without a repository there is no root for .github/ (and no origin to install from): say so, alone.
        problems.append(ConfigProblem(
            location="--github",
            message=f"{directory} is not inside a git repository: the workflows go to .github/ at the "
                    "repository's root, and there is none (run `git init` there first, or leave out --github)"))
        github = None
    relative = (directory.resolve() / MANIFEST_NAME).relative_to(root).as_posix() if github is not None else ""
    problems += directory_problems(directory, relative)
    if github is not None:
        github, install_problems = _with_install(replace(github, manifest=relative), root)
        problems += install_problems
        problems += [p for p in github.problems()
                     if (p.location != "--install" or not install_problems) and p.location != "manifest"]
    if problems:
        raise _usage_error(problems)
    manifest = directory / MANIFEST_NAME
    if manifest.exists() and not force:
        raise UsageError(f"{manifest} already exists", hint="Pass --force to overwrite it.")
    if github is not None and not force:
        refuse_existing(root)  # before anything is written
    text = render_manifest(spec)
    written: list[Path] = []
    for sub in ("sections", "results", "prompts", "checkpoints/reference"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    files = {
        manifest: text,
        directory / "sections" / "limitations.md": "- Evaluated on English prompts only.\n",
        directory / "results" / ".gitkeep": "",
        directory / "prompts" / "chat.jsonl": "".join(json.dumps({"prompt": p}) + "\n" for p in _SAMPLE_PROMPTS),
        directory / "checkpoints" / "reference" / "README.txt": (
            "Put the reference model's files here (config.json, *.safetensors, tokenizer files),\n"
            "or point [[artifact]].source at a Hub repo pinned to a commit.\n"
        ),
    }
    for path, content in files.items():
        if path.exists() and path != manifest:
            continue
        path.write_text(content, encoding="utf-8")
        written.append(path)
    loaded = load_manifest(manifest)  # the scaffold must pass `hfrelease check`
    if github is not None:
        written += write_workflows(loaded, root=root, spec=github, force=force)
    return written
