"""What `hfrelease bundle`, `publish` and `verify` print, as views (`hfrelease.stages.view`) the CLI draws."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hfrelease.stages.view import Block, Part, Styled, line, note, table

if TYPE_CHECKING:
    from hfrelease.publish.events import PublishEvent
    from hfrelease.stages.publish import BundleReport, PublishStageReport, VerifyReport


def bundle_view(report: BundleReport) -> list[Block]:
    """Each repo's files with their role, size and hash; the notes of each."""
    view = list[Block]()
    result = report.bundle
    for repo in result.repos:
        view.append(table(f"{repo.repo} ({repo.artifact_id}) @ {result.tag}", ("path", "role", "bytes", "sha256"),
                          [(item.path, item.role, f"{item.size:,}", item.sha256[:16]) for item in repo.files]))
        view += [note(text) for text in repo.notes]
    if not result.repos:
        which = "the selected artifacts" if report.selected else "the family's artifacts"
        view.append(note(f"nothing to publish: {which} ({', '.join(report.unpublished) or 'none'}) all have "
                         "`publish = false` in release.toml, so no repo was bundled"))
    return view


def publish_view(stage: PublishStageReport, *, verbose: int) -> list[Block]:
    """The plan per repo (each file with a dry run or `verbose`, and the card's diff), then the outcome."""
    from hfrelease.redact import redact

    report = stage.report
    plan = report.plan
    view: list[Block] = [table(
        f"{'plan' if report.dry_run else 'release'} {plan.tag} -> {report.endpoint}",
        ("repo", "action", "added", "changed", "deleted", "bytes to send", "tag"),
        [(r.repo, r.action, str(len(r.changes.added)), str(len(r.changes.changed)), str(len(r.changes.deleted)),
          f"{r.changes.bytes_to_send:,}", f"{plan.tag} ({r.tag_state})") for r in plan.repos])]
    allowed = "gate failed, allowed by --allow-failed-gates:"
    view += [note(problem.text, label=allowed) for problem in report.gates.failed]
    for r in plan.repos:
        view += [note(text) for text in r.bundle.notes]
        if report.dry_run or verbose:
            view += [line(f"  {r.repo}: {'+' if item in r.changes.added else '~'} {item.path}")
                     for item in (*r.changes.added, *r.changes.changed)]
            view += [line(f"  {r.repo}: - {path}") for path in r.changes.deleted]
            if r.card_diff:
                view.append(line(redact(r.card_diff)))
    if report.dry_run:
        view.append(line(f"dry run ({report.dry_run_reason or ''}): nothing was pushed", err=True))
    elif report.outcome is not None:
        for o in report.outcome.repos:
            where = f" at {o.commit[:12]}" if o.commit else ""
            view.append(line(f"{o.repo}: {o.status}{where}" + (f" ({o.staged_ref})" if o.staged_ref else "")))
        view.append(line(Styled(report.outcome.message, "bold green"), err=True))
    return view


def verify_view(report: VerifyReport) -> list[Block]:
    """One row per verified repo; a note where there was no local bundle; the served artifact's answer."""
    verified, served = report.verified, report.served
    removed = report.download is None
    view: list[Block] = [table("Verified releases", (
        "artifact", "repo", "tag", "result", "files", "compared with", "downloaded to"), [
        (v.artifact_id, v.repo, v.tag,
         Styled("ok", "green") if v.ok else Styled(f"{len(v.problems)} problem(s)", "red"), str(v.files),
         ", ".join(v.compared_with), "(removed)" if removed else str(v.directory)) for v in verified])]
    if report.temporary:
        view.append(note("the download was removed: every check passed (--out DIR keeps it)") if removed else
                    note(f"the download is kept for inspection in {report.download} (a temporary directory: "
                         "remove it when done)"))
    # Each problem is named once, by the error that ends the command (`verification_error`).
    view += [note(f"{v.repo}: no local bundle to compare with (the Hub's MANIFEST and LFS oids only; pass "
                  "--bundle DIR)") for v in verified if v.ok and v.local_bundle is None]
    if served is not None:
        view += [line(f"served {served.artifact_id} from its downloaded copy: {served.command}"),
                 line(f"  Q: {served.question}  A: {served.answer}", wrap=True)]
    return view


@dataclass(frozen=True, kw_only=True)
class RepoProgress:
    """What a repo's line of the release's live display becomes: its description (None: unchanged), the
    bytes staged so far (None: unchanged; `staged`: all of them), and whether the line is new."""

    repo: str
    description: tuple[Part, ...] | None = None
    completed: int | None = None
    total: int | None = None
    new: bool = False
    staged: bool = False


class PublishProgress:
    """A release's progress per repo, kept from the publish events (`hfrelease.publish.events`): the steps
    done (stage -> verify -> promote -> tag) and the bytes read for upload so far."""

    def __init__(self) -> None:
        self.sent: dict[str, dict[str, int]] = {}  # repo -> path -> bytes read for upload so far
        self.done: dict[str, list[str]] = {}  # repo -> steps finished

    def update(self, event: PublishEvent) -> RepoProgress | None:
        """What `event` changes on its repo's line (None: nothing, or a repo that was never planned)."""
        from hfrelease.publish.events import BytesSent, RepoPlanned, StepDone, StepStarted

        if isinstance(event, RepoPlanned):
            self.sent[event.repo], self.done[event.repo] = {}, []
            description = (("already released",) if event.released else self._steps(event.repo, None))
            return RepoProgress(repo=event.repo, description=description, total=event.bytes_to_send or None,
                                completed=0, new=True)
        if event.repo not in self.done:
            return None
        if isinstance(event, BytesSent):
            self.sent[event.repo][event.path] = event.sent
            return RepoProgress(repo=event.repo, completed=sum(self.sent[event.repo].values()))
        if isinstance(event, StepStarted):
            return RepoProgress(repo=event.repo, description=self._steps(event.repo, event.step))
        if isinstance(event, StepDone):
            self.done[event.repo].append(event.step)
            description = self._steps(event.repo, None)
            if event.step == "tag":
                description = (Styled(f"released {event.detail}", "green"), f" at {(event.commit or '')[:12]}")
            # After staging, the Hub has all the content, including what it skipped because it held it already.
            return RepoProgress(repo=event.repo, description=description, staged=event.step == "stage")
        return None

    def _steps(self, repo: str, current: str | None) -> tuple[Part, ...]:
        from hfrelease.publish.events import STEPS

        done = self.done.get(repo, [])
        styles = [("green" if s in done else "bold yellow" if s == current else "dim") for s in STEPS]
        return tuple(part for i, (s, style) in enumerate(zip(STEPS, styles, strict=True))
                     for part in ((" → ",) if i else ()) + (Styled(s, style),))
