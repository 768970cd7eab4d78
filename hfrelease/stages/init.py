"""`hfrelease init`'s stage: a new family directory scaffolded, and what to set up by hand before its first
release tag; its view for people."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.stages.view import Block, Styled, line

if TYPE_CHECKING:
    from hfrelease.ci.scaffold import FamilySpec
    from hfrelease.ci.workflows import WorkflowSpec


@dataclass(frozen=True, kw_only=True)
class InitSettings:
    directory: Path
    family: FamilySpec
    github: WorkflowSpec | None = None  # also write the repository's workflows (`--github`)
    force: bool = False  # overwrite an existing release.toml


@dataclass(frozen=True, kw_only=True)
class InitReport:
    directory: Path
    written: tuple[Path, ...]
    # With --github: the repository settings the workflows cannot make, one step each (README: Releasing
    # from GitHub Actions); they name the family's published repos, so they are read from the written manifest.
    setup: tuple[str, ...] | None = None
    # With --github: what the release needs that nothing can check (`hfrelease.ci.workflows.PREREQUISITES`).
    prerequisites: tuple[str, ...] = ()


def init_stage(settings: InitSettings) -> InitReport:
    """Scaffold the family directory (and with `github` the workflows at the repository's root)."""
    from hfrelease.ci.scaffold import scaffold_family

    written = scaffold_family(settings.directory, settings.family, force=settings.force, github=settings.github)
    setup = None
    if settings.github is not None:
        from hfrelease.ci.workflows import PREREQUISITES, repository_settings
        from hfrelease.manifest import load_manifest

        loaded = load_manifest(settings.directory, check_files=False)
        setup = tuple(repository_settings(settings.github, repos=[a.repo for a in loaded.artifact if a.publish]))
        return InitReport(directory=settings.directory, written=tuple(written), setup=setup,
                          prerequisites=PREREQUISITES)
    return InitReport(directory=settings.directory, written=tuple(written), setup=setup)


def init_view(report: InitReport) -> list[Block]:
    """Each file written, what to do next, and with --github the numbered set-up steps."""
    view: list[Block] = [line(f"  wrote {path}", err=True, wrap=True) for path in report.written]
    view.append(line(Styled("✓", "green"), f" scaffolded {report.directory}: edit release.toml, then "
                     f"`hfrelease check {report.directory}`", err=True, wrap=True))
    if report.prerequisites:
        view.append(line("What the release needs that hfrelease cannot check (`hfrelease check` notes these too):",
                         err=True, wrap=True))
        view += [line(f"  - {item}", err=True) for item in report.prerequisites]
    if report.setup is not None:
        view.append(line("Before the first release tag, set up the repositories (README: Releasing from GitHub "
                         "Actions):", err=True, wrap=True))
        view += [line(f"  {number}. {step}", err=True) for number, step in enumerate(report.setup, start=1)]
    return view
