"""A release as planned, before anything is written: per repo its bundle, what the Hub holds, what changes.

Planned in `release.py`, carried out by `release.py` and `promote.py`, both of which read these types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hfrelease.bundle import FamilyBundle, RepoBundle
from hfrelease.publish.remote import RemoteRevision, RepoChanges

TagState = Literal["absent", "released", "elsewhere"]


@dataclass(frozen=True, kw_only=True)
class RepoPlan:
    """One repo's part of a release, as read from the Hub before anything is written."""

    bundle: RepoBundle
    main: RemoteRevision | None  # None: the repo does not exist yet
    changes: RepoChanges  # bundle against main
    tag_commit: str | None  # where the release tag points now, if it exists
    tag_state: TagState
    card_diff: str  # unified diff of README.md, Hub's main -> bundle ("" when equal)
    open_pr: int | None = None  # the open pull request an earlier `--pr` run made for this release
    staging_left: bool = False  # the staging branch exists (an interrupted run left it)
    failed_gates: tuple[str, ...] = ()  # published with --allow-failed-gates: these did not pass

    def commit_note(self) -> str:
        """What this repo's commits (and tag) say about the gates it was published with failing ("" if none)."""
        if not self.failed_gates:
            return ""
        lines = "\n".join(f"- {text}" for text in self.failed_gates)
        return f"Published with --allow-failed-gates; these recorded gate results did not pass:\n{lines}"

    @property
    def repo(self) -> str:
        return self.bundle.repo

    @property
    def action(self) -> str:
        close = f", close PR #{self.open_pr}" if self.open_pr is not None else ""
        if self.tag_state == "released":
            return f"none (already released){close}"
        if self.main is None:
            return "create repo, commit, tag"
        return ("commit, tag" if not self.changes.empty else "tag only (main already holds the bundle)") + close


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    bundle: FamilyBundle
    endpoint: str
    repos: tuple[RepoPlan, ...]

    @property
    def tag(self) -> str:
        return self.bundle.tag
