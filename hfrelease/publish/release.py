"""The all-or-nothing release of a family: plan every repo, stage and verify all, then promote and tag all.

    plan     read each repo's main and tags; diff against the bundle; refuse a tag that exists elsewhere
    stage    per repo, the bundle on `hfrelease/staging/<tag>` (or a pull request with `pr=True`), verified
             by reading back its tree and downloading MANIFEST and the card
    promote  only when every repo is staged: one `create_commit` on main with `parent_commit` = the main
             the plan read (a concurrent change is a 412, never overwritten); the LFS content is already
             on the Hub, so this commit sends only the small regular files again
    tag      the tag at exactly that commit; staging branches deleted; pull requests an earlier `--pr` run
             opened for this release closed with a comment naming the commit on main that carries it;
             repos added to the collection (`promote.py` holds these last steps)

A failure while staging leaves every main and tag as it was, and a re-run reuses what was staged. The
Hub has no multi-repo transaction, so the promote step (a few small commits) is the one window in which
some mains can move before others; a failure there names every repo's state and the command that resumes
it forward: released repos are left alone, the rest are committed from what was staged and tagged once.

Progress goes out as structured events (`events.py`) to `on_event`; log lines to `echo`.
"""

from __future__ import annotations

import difflib
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from huggingface_hub import HfApi

from hfrelease.bundle import ATTESTATION_NAME, FamilyBundle, RepoBundle
from hfrelease.errors import HubError, PublishError
from hfrelease.hub_errors import SCOPE_HINT, describe, hub_errors, is_auth_failure
from hfrelease.publish import events
from hfrelease.publish.events import BytesSent, OnEvent, RepoPlanned, StepDone, StepStarted
from hfrelease.publish.plan import ReleasePlan, RepoPlan, TagState
from hfrelease.publish.promote import RepoOutcome, promote_and_tag, resume_hint, tidy_released
from hfrelease.publish.readback import verify_revision
from hfrelease.publish.remote import RemoteRevision, compare, head_commit, holds_release, read_revision
from hfrelease.publish.staging import (
    Staged,
    find_pull_request,
    pr_title,
    stage_as_pull_request,
    stage_on_branch,
    staging_branch,
)
from hfrelease.redact import redact

Echo = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class ReleaseOutcome:
    tag: str
    status: Literal["published", "already-published", "staged"]
    repos: tuple[RepoOutcome, ...]
    message: str


def plan_repo(
    api: HfApi, bundle: RepoBundle, *, tag: str, family: str | None = None, failed_gates: tuple[str, ...] = ()
) -> RepoPlan:
    """Read one repo; with `family`, also find the pull request a `--pr` run of this release left open."""
    main = read_revision(api, bundle.repo, "main")
    tag_commit: str | None = None
    state: TagState = "absent"
    open_pr: int | None = None
    staging_left = False
    if main is not None:
        refs = api.list_repo_refs(bundle.repo, include_pull_requests=family is not None)
        tag_commit = {t.name: t.target_commit for t in refs.tags}.get(tag)
        staging_left = staging_branch(tag) in {b.name for b in refs.branches}
        # Pull request refs are listed with the other refs: without any, the discussions need not be read.
        if family is not None and refs.pull_requests:
            open_pr = find_pull_request(api, bundle.repo, pr_title(family, tag))
        if tag_commit is not None:
            tagged = read_revision(api, bundle.repo, tag_commit)
            # The attestation is not content (`holds_release`): this release tagged with another run's is released.
            state = "released" if tagged is not None and holds_release(bundle, tagged) else "elsewhere"
    changes = compare(bundle, main)
    if main is not None and ATTESTATION_NAME in main.files and changes.release_only().empty:
        # Main holds this release with another run's attestation (a run that stopped before tagging): it is
        # tagged as it is, like a released repo, rather than committed again for the attestation alone.
        changes = changes.release_only()
    return RepoPlan(
        bundle=bundle, main=main, changes=changes, tag_commit=tag_commit, tag_state=state,
        card_diff=_card_diff(api, bundle, main), open_pr=open_pr, staging_left=staging_left,
        failed_gates=failed_gates,
    )  # fmt: skip


def _card_diff(api: HfApi, bundle: RepoBundle, main: RemoteRevision | None) -> str:
    card = bundle.file("README.md")
    new = card.read().decode("utf-8", errors="replace") if card is not None else ""
    old = ""
    if main is not None and "README.md" in main.files:
        with tempfile.TemporaryDirectory(prefix="hfrelease-card-") as scratch:
            path = api.hf_hub_download(bundle.repo, "README.md", revision=main.commit, cache_dir=scratch)
            old = Path(path).read_text(encoding="utf-8", errors="replace")
    if old == new:
        return ""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=f"{bundle.repo}/README.md (Hub main)", tofile=f"{bundle.repo}/README.md (this release)",
    )  # fmt: skip
    return redact("".join(lines))


def plan_release(
    bundle: FamilyBundle, api: HfApi, *, failed_gates: Mapping[str, tuple[str, ...]] | None = None
) -> ReleasePlan:
    """Read the Hub and diff every repo against the bundle; writes nothing.

    `failed_gates`: artifact id -> the gates it is published with failing (`--allow-failed-gates`).
    """
    failed = failed_gates or {}
    repos = []
    for repo in bundle.repos:
        with hub_errors(f"planning {bundle.tag}: reading {repo.repo} (nothing was changed)"):
            repos.append(plan_repo(api, repo, tag=bundle.tag, family=bundle.family,
                                   failed_gates=failed.get(repo.artifact_id, ())))
    return ReleasePlan(bundle=bundle, endpoint=api.endpoint, repos=tuple(repos))


def check_tags(plan: ReleasePlan) -> None:
    """An existing release tag on other content is refused for every repo at once, before anything is written."""
    clashes = [r for r in plan.repos if r.tag_state == "elsewhere"]
    if clashes:
        lines = "\n".join(f"  - {r.repo}: {plan.tag} -> {r.tag_commit}, which holds other files" for r in clashes)
        raise PublishError(
            f"tag {plan.tag} already exists on other content:\n{lines}",
            hint="Nothing was changed. A published release is immutable: bump `version` in release.toml "
            "(or delete the tag on the Hub if that release must be replaced).",
        )


def check_pinned_weights(plan: ReleasePlan) -> None:
    """A repo whose weights are its own at a pinned revision must still hold exactly them on main.

    Publishing an artifact sourced from the repo it is published to (source.hub == repo, the flagship's
    quants) never uploads its weights: they are in the repo, and the release commit only adds the card,
    citation, results, plugin and MANIFEST on top. If main's weights are no longer the pinned ones (someone
    pushed new weights after the pin), publishing would either describe weights the repo does not hold or
    overwrite the newer ones with the pinned ones; both are refused, for every repo at once, before
    anything is written.
    """
    moved = []
    for r in plan.repos:
        if r.bundle.pinned is None or r.tag_state == "released":
            continue
        weights = {f.path for f in r.bundle.files if f.role == "weights"}
        differ = sorted(f.path for f in (*r.changes.added, *r.changes.changed) if f.path in weights)
        if differ:
            shown = ", ".join(differ[:5]) + (" ..." if len(differ) > 5 else "")
            moved.append(f"  - {r.repo}: main does not hold the weights pinned at {r.bundle.pinned[:12]} ({shown})")
    if moved:
        raise PublishError(
            "the weights of a repo published from itself have changed since they were pinned:\n" + "\n".join(moved),
            hint="Nothing was changed. Pin the revision whose weights you evaluated (source.revision = the commit "
            "main holds now, then re-run eval), or restore those weights on main.",
        )


def execute_release(
    plan: ReleasePlan,
    api: HfApi,
    *,
    pr: bool = False,
    run_id: str | None = None,
    echo: Echo | None = None,
    on_event: OnEvent | None = None,
    resume_command: str | None = None,
) -> ReleaseOutcome:
    """Carry out `plan`: stage and verify all, then (unless `pr`) promote, tag and collect all.

    `resume_command` is the command a failure's hint tells the user to run (default: "the same `hfrelease
    publish` command"); `on_event` receives the structured progress of `events.py`.
    """
    say = echo or (lambda _: None)
    emit = on_event or events.ignore
    run = run_id or uuid.uuid4().hex
    resume = resume_command or "the same `hfrelease publish` command (without --pr)"
    check_tags(plan)
    check_pinned_weights(plan)
    for r in plan.repos:
        released = r.tag_state == "released"
        emit(RepoPlanned(repo=r.repo, bytes_to_send=0 if released else r.changes.bytes_to_send, released=released))
    todo = [r for r in plan.repos if r.tag_state != "released"]
    finished = [r for r in plan.repos if r.tag_state == "released"]
    done = [RepoOutcome(repo=r.repo, status="already-published", commit=r.tag_commit) for r in finished]
    if not pr:
        # What an earlier, interrupted or `--pr` run left behind on repos that are already released.
        tidy_released(plan.tag, api, finished, say=say)
    if not todo:
        # A run that committed and tagged every repo may have failed making the collection: this finishes it.
        note = _add_to_collection(plan, api, say, done, resume=resume)
        return ReleaseOutcome(tag=plan.tag, status="already-published", repos=tuple(done),
                              message=f"{plan.tag} is already published: nothing to do{note}")  # fmt: skip
    with hub_errors(f"creating the missing repos of {plan.tag} (no main or tag was changed)"):
        todo = [_ensure_repo(api, r, private=plan.bundle.private) for r in todo]
    staged = _stage_all(plan, api, todo, pr=pr, run=run, say=say, emit=emit, resume=resume)
    if pr:
        outcomes = [
            RepoOutcome(repo=r.repo, status="staged", commit=s.commit, staged_ref=s.ref) if (s := staged.get(r.repo))
            else RepoOutcome(repo=r.repo, status="staged", commit=r.main.commit if r.main else None)
            for r in todo
        ]  # fmt: skip
        return ReleaseOutcome(tag=plan.tag, status="staged", repos=tuple(done + outcomes),
                              message=f"{plan.tag} staged for review; run without --pr to publish")  # fmt: skip
    # Repos a concurrent run of the same release has already committed are only tagged (if it has not yet):
    # carrying on, rather than stopping, is what guarantees the release completes if that run dies.
    with hub_errors(f"re-reading each main before promoting {plan.tag} (no main or tag was changed)"):
        concurrent = _check_mains(plan, api, todo)
    outcomes = promote_and_tag(plan, api, todo, staged, run=run, say=say, emit=emit, concurrent=concurrent,
                               resume=resume)  # fmt: skip
    note = _add_to_collection(plan, api, say, [*done, *outcomes], resume=resume)
    ours = [o.repo for o in outcomes if o.status in ("published", "tagged")]
    theirs = [o.repo for o in outcomes if o.status == "already-published"]
    overall: Literal["published", "already-published"] = "published" if ours else "already-published"
    message = f"published {plan.tag} ({len(ours)} repos)" if ours else f"{plan.tag} was already published"
    if theirs:
        message += f"; already published by a concurrent run: {', '.join(theirs)}"
    return ReleaseOutcome(tag=plan.tag, status=overall, repos=tuple(done + outcomes), message=message + note)


def _ensure_repo(api: HfApi, plan: RepoPlan, *, private: bool) -> RepoPlan:
    """Create a missing repo (its initial commit holds only .gitattributes) and diff against its main."""
    if plan.main is not None:
        return plan
    try:
        api.create_repo(plan.repo, private=private, exist_ok=True)
    except Exception:
        # The Hub may have made the repo and the answer been lost: what it holds decides, not the error.
        if read_revision(api, plan.repo, "main") is None:
            raise
    main = read_revision(api, plan.repo, "main")
    if main is None:
        raise PublishError(f"{plan.repo}: created, but its main branch cannot be read")
    return replace(plan, main=main, changes=compare(plan.bundle, main))


def _reuse_pull_request(api: HfApi, r: RepoPlan) -> Staged | None:
    """The pull request an earlier `--pr` run opened, if it holds exactly the bundle: staged already."""
    if r.open_pr is None:
        return None
    ref = f"refs/pr/{r.open_pr}"
    current = read_revision(api, r.repo, ref)
    if current is None or not compare(r.bundle, current).empty:
        return None
    return Staged(repo=r.repo, ref=ref, commit=current.commit, pr_num=r.open_pr, committed=False)


def _stage_all(
    plan: ReleasePlan, api: HfApi, todo: list[RepoPlan], *, pr: bool, run: str, say: Echo, emit: OnEvent,
    resume: str,
) -> dict[str, Staged]:  # fmt: skip
    staged: dict[str, Staged] = {}
    for number, r in enumerate(todo, start=1):
        if r.changes.empty or r.main is None:
            for step in events.STEPS[:2]:
                emit(StepDone(repo=r.repo, step=step, commit=r.main.commit if r.main else None,
                              detail="main already holds the bundle"))  # fmt: skip
            continue

        def progress(path: str, sent: int, size: int, repo: str = r.repo) -> None:
            emit(BytesSent(repo=repo, path=path, sent=sent, size=size))

        try:
            say(f"staging {r.repo} ({number}/{len(todo)}): {r.changes.bytes_to_send} bytes at most")
            emit(StepStarted(repo=r.repo, step="stage"))
            if pr:
                result = stage_as_pull_request(api, r.bundle, family=plan.bundle.family, tag=plan.tag, base=r.main,
                                               run_id=run, progress=progress, note=r.commit_note())  # fmt: skip
            else:
                result = _reuse_pull_request(api, r) or stage_on_branch(
                    api, r.bundle, tag=plan.tag, base=r.main, run_id=run, progress=progress, exists=r.staging_left,
                    note=r.commit_note(),
                )
            emit(StepDone(repo=r.repo, step="stage", commit=result.commit,
                          detail="committed" if result.committed else f"reused {result.ref}"))  # fmt: skip
            emit(StepStarted(repo=r.repo, step="verify"))
            verify_revision(api, r.bundle, result.commit)
            emit(StepDone(repo=r.repo, step="verify", commit=result.commit, detail="verified"))
        except Exception as error:
            raise PublishError(
                f"staging {r.repo} failed: {redact(describe(error))}",
                hint=(SCOPE_HINT + " " if is_auth_failure(error) else "")
                + resume_hint("No repo's main branch or tags were changed.", resume),
            ) from error
        staged[r.repo] = result
        say(f"staged {r.repo} at {result.ref} ({result.commit[:12]}), verified")
    return staged


def _check_mains(plan: ReleasePlan, api: HfApi, todo: list[RepoPlan]) -> dict[str, str]:
    """Just before promoting: every main is where the plan read it. Returns {repo: commit} a concurrent run made."""
    released_elsewhere: dict[str, str] = {}
    for r in todo:
        if r.main is None:
            continue
        # One request per repo when nothing moved (the usual case); the tree only when something did.
        if head_commit(api, r.repo, "main") in (None, r.main.commit):
            continue
        now = read_revision(api, r.repo, "main")
        if now is None or now.commit == r.main.commit:
            continue
        if holds_release(r.bundle, now):
            released_elsewhere[r.repo] = now.commit
            continue
        raise PublishError(
            f"{r.repo}: main moved from {r.main.commit[:12]} to {now.commit[:12]} since the plan was read "
            "(a concurrent change); nothing was overwritten and no main or tag was changed",
            hint="Look at the new commit on the Hub, then run `hfrelease publish` again to plan against it.",
        )
    return released_elsewhere


class CollectionError(HubError):
    """Every repo is released, but the collection could not be made or filled: the release stands, exit 7."""


# What a Hub without a collections route answers (an emulator, a mirror): the release stands, with a warning.
_NO_COLLECTIONS = (404, 405, 501)


def _add_to_collection(
    plan: ReleasePlan, api: HfApi, say: Echo, released: Sequence[RepoOutcome], *, resume: str
) -> str:
    """Add every repo to the family's collection (made if missing); idempotent, so a re-run repairs it.

    Returns a note for the outcome's message ("" when there is nothing to say)."""
    title = plan.bundle.collection
    if not title:
        return ""
    try:
        with hub_errors(f"adding the repos to the collection {title!r}"):
            collection = api.create_collection(title, namespace=plan.bundle.owner, exists_ok=True,
                                               private=plan.bundle.private)  # fmt: skip
            for r in plan.repos:
                api.add_collection_item(collection.slug, item_id=r.repo, item_type="model", exists_ok=True)
    except HubError as error:
        if error.status in _NO_COLLECTIONS:
            note = (f"; warning: collection {title!r} not made, this Hub has no collections ({error.message}); "
                    "remove `collection` from [publish] in release.toml to publish to it without one")
            say(note.removeprefix("; "))
            return note
        # The repos are committed and tagged: that cannot be undone, nor should it be. The collection is the
        # one step left, and the next run (which finds every repo released) makes it.
        where = ", ".join(f"{o.repo} at {o.commit[:12]}" if o.commit else o.repo for o in released)
        again = resume if resume.startswith("the ") else f"`{resume}`"
        raise CollectionError(
            f"{plan.tag} is published (every repo committed and tagged: {where}), but {error.message}",
            hint=(SCOPE_HINT + " " if error.status in (401, 403) else "")
            + f"The release itself is complete and stays as it is. Re-run {again} to make the collection and "
            "add the repos (released repos are left alone); if this Hub has no collections, remove `collection` "
            "from [publish] in release.toml.",
            status=error.status,
        ) from error
    say(f"collection {collection.slug}: {len(plan.repos)} repos")
    return ""
