"""The card stages: render the family's cards from its ledger, and lint what was rendered.

`render_stage` is `hfrelease render`; `lint_stage` is `hfrelease check --cards`; `compare_stage` is `hfrelease
compare`. With `since`, render and lint read the same comparison (`read_comparison`, what `compare_stage` reads)
for the 'Changes since' section.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrelease.errors import ExitCode

if TYPE_CHECKING:
    from hfrelease.cards import CardInputs
    from hfrelease.cards.write import FileChange
    from hfrelease.compare import FamilyComparison
    from hfrelease.manifest import Manifest
    from hfrelease.stages.view import Block


def compare_stage(
    old: str, new: str, manifest_path: Path | None, *, hub: str | None, hub_root: Path | None, as_json: bool = False,
    markdown: bool = False, announce: Callable[[str], None] | None = None,
) -> FamilyComparison:
    """`hfrelease compare`: refuses `--json` with `--markdown` (exit 2), loads the manifest when one is named or a
    side needs it (a git:REF or a release tag), and reads the comparison (`read_comparison`)."""
    from hfrelease.errors import UsageError
    from hfrelease.manifest import find_manifest, load_manifest

    if as_json and markdown:
        raise UsageError("--json and --markdown: choose one")
    manifest = None
    if manifest_path is not None or any(s.startswith(("git:", "hub:")) or not Path(s).is_dir() for s in (old, new)):
        manifest = load_manifest(find_manifest(manifest_path or Path()), check_files=False)
    return read_comparison(old, new, manifest, hub=hub, hub_root=hub_root, announce=announce)


def read_comparison(
    old: str, new: str, manifest: Manifest | None, *, hub: str | None, hub_root: Path | None,
    announce: Callable[[str], None] | None = None,
) -> FamilyComparison:
    """`compare_family`, with the Hub opened (the built-in one for `local`) when a side is a release tag."""
    from hfrelease.compare import compare_family

    tags = [s for s in (old, new) if not s.startswith("git:") and (s.startswith("hub:") or not Path(s).is_dir())]
    if manifest is None or not tags:
        return compare_family(old, new, manifest=manifest)
    from hfrelease.publish import open_hub, resolve_token

    endpoint = hub or os.environ.get("HF_ENDPOINT") or manifest.publish.endpoint
    with open_hub(endpoint, family_root=manifest.root, hub_root=hub_root, announce=announce) as target:
        token = target.token or resolve_token()
        return compare_family(old, new, manifest=manifest, endpoint=target.endpoint,
                              token=token.value if token else None)


def _with_changes(inputs: CardInputs, *, since: str | None, hub: str | None, hub_root: Path | None,
                  announce: Callable[[str], None] | None) -> CardInputs:
    """`inputs`; with `since`, the comparison of the ledger with that release beside them.

    `since = "previous"` on a family's first release (no release tag on the Hub yet) is no comparison: the
    cards have no "Changes since" section, and `announce` says so, so a workflow can always pass it."""
    import dataclasses

    from hfrelease.compare.previous import NoPreviousRelease

    if since is None:
        return inputs
    manifest = inputs.manifest
    try:
        comparison = read_comparison(since, str(manifest.ledger_dir), manifest, hub=hub, hub_root=hub_root,
                                     announce=announce)
    except NoPreviousRelease as exc:
        if announce is not None:
            announce(f"{exc.message}: the cards have no 'Changes since' section")
        return inputs
    return dataclasses.replace(inputs, changes=comparison)


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    """What `hfrelease render` was asked to do (its options, parsed)."""

    manifest: Path
    artifacts: tuple[str, ...] = ()
    plots: bool = True
    write: bool = True  # False: only say what would change (--diff)
    since: str | None = None
    hub: str | None = None
    hub_root: Path | None = None


@dataclass(frozen=True, kw_only=True)
class RenderReport:
    """The files a render changed (or, not written, would change)."""

    family_root: Path
    cards: int
    changes: tuple[FileChange, ...]
    written: bool

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        return {"cards": self.cards, "written": self.written,
                "changes": [{"path": str(c.path), "status": c.status} for c in self.changes]}

    def diff(self) -> str:
        """The changes as a unified diff."""
        from hfrelease.cards import unified_diff

        return unified_diff(list(self.changes), self.family_root)


def render_view(report: RenderReport) -> list[Block]:
    """What `render` says on stderr: each file changed and a count, or (not written) how many would change."""
    from hfrelease.stages.view import Styled, line

    n = len(report.changes)
    if not report.written:
        return [line(f"{n} file{'s' if n != 1 else ''} would change (nothing written)", err=True, wrap=True)]
    return [*(line(f"{change.status:>8} {change.path}", err=True, wrap=True) for change in report.changes),
            line(Styled("✓", "green"), f" {report.cards} cards rendered, {n} files changed", err=True, wrap=True)]


def render_stage(settings: RenderSettings, *, announce: Callable[[str], None] | None = None) -> RenderReport:
    """Render the cards, citations and plots from the ledger; write what changed unless `settings.write` is off.

    `announce` is told when a local Hub is started to read a `since` release tag.
    """
    from hfrelease.cards import apply_changes, plan_changes, read_inputs, render_family
    from hfrelease.manifest import find_manifest, load_manifest
    from hfrelease.manifest.selection import select

    loaded = load_manifest(find_manifest(settings.manifest), check_files=False)
    artifacts = select(loaded, artifacts=settings.artifacts).artifacts
    inputs = _with_changes(read_inputs(loaded), since=settings.since, hub=settings.hub, hub_root=settings.hub_root,
                           announce=announce)
    rendered = render_family(inputs, plots=settings.plots, artifacts=list(artifacts) or None)
    changes = plan_changes(rendered, loaded.root)
    if not settings.plots:  # plot files on disk are left as they are
        changes = [c for c in changes if c.path.parent.name != "plots"]
    if settings.write:
        apply_changes(changes)
    return RenderReport(family_root=loaded.root, cards=len(rendered.cards), changes=tuple(changes),
                        written=settings.write)


@dataclass(frozen=True, kw_only=True)
class LintSettings:
    """What `hfrelease check --cards` was asked to check."""

    max_age_days: int | None = None
    since: str | None = None  # the cards were rendered with `render --since SINCE`


@dataclass(frozen=True, kw_only=True)
class LintReport:
    """Every problem of the family's rendered cards (none: fit to publish)."""

    checked: int
    problems: tuple[str, ...]
    cards: tuple[Path, ...] = ()  # each card linted (its README.md)
    # Linted without --since, the release the cards were rendered against (`render --since`): their numbers
    # could not be checked, and checking with it, not re-rendering, is what they need.
    rendered_since: str | None = None

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.CONFIG if self.problems else ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "linted": [str(path) for path in self.cards], "problems": list(self.problems),
                "rendered_since": self.rendered_since}

    def hint(self) -> str:
        """What to do about the problems: check against the release the cards name, and/or re-render."""
        rerender = "Re-render with `hfrelease render` (never edit numbers by hand)."
        if self.rendered_since is None:
            return rerender
        check = (f"Check them against the release they were rendered with: `hfrelease check --cards "
                 f"--since {self.rendered_since}`.")
        return check if len(self.problems) == 1 else f"{check} {rerender}"


def lint_stage(manifest: Manifest, settings: LintSettings, *,
               announce: Callable[[str], None] | None = None) -> LintReport:
    """Lint the rendered cards of `manifest` against its ledger: every problem at once."""
    from datetime import UTC, datetime

    from hfrelease.cards import lint_cards, read_cards, read_inputs
    from hfrelease.cards.lint import rendered_since
    from hfrelease.errors import HfreleaseError

    cards, problems = read_cards(manifest)
    paths = tuple(card.path for card in cards)
    try:
        inputs = read_inputs(manifest)
    except HfreleaseError as exc:
        return LintReport(checked=len(cards), cards=paths, problems=(*problems, f"ledger unreadable: {exc.message}"))
    inputs = _with_changes(inputs, since=settings.since, hub=None, hub_root=None, announce=announce)
    problems += lint_cards(manifest, cards, inputs=inputs, today=datetime.now(UTC).date(),
                           max_age_days=settings.max_age_days)
    since = rendered_since(cards) if settings.since is None else None
    return LintReport(checked=len(cards), cards=paths, problems=tuple(problems), rendered_since=since)
