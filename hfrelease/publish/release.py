"""The all-or-nothing release of a family: plan every repo, stage and verify all, then promote and tag all.

    plan     read each repo's main and tags; diff against the bundle; refuse a tag that exists elsewhere
    stage    per repo, the bundle on `hfrelease/staging/<tag>` (or a pull request with `pr=True`), verified
             by reading back its tree and downloading MANIFEST and the card
    promote  only when every repo is staged: one `create_commit` on main with `parent_commit` = the main
             the plan read (a concurrent change is a 412, never overwritten); the LFS content is already
             on the Hub, so this commit sends only the small regular files again
    tag      the tag at exactly that commit; staging branches deleted; repos added to the collection

A failure while staging leaves every main and tag as it was, and a re-run reuses what was staged. The
Hub has no multi-repo transaction, so the promote step (a few small commits) is the one window in which
some mains can move before others; a failure there is resumed forward by re-running, which the error says.
"""

from __future__ import annotations

import contextlib
import difflib
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from hfrelease.bundle import FamilyBundle, RepoBundle
from hfrelease.errors import HfreleaseError, PublishError
from hfrelease.publish.remote import RemoteRevision, RepoChanges, compare, read_revision
from hfrelease.publish.staging import Staged, StaleParentError, commit_bundle, stage_as_pull_request, stage_on_branch
from hfrelease.publish.staging import staging_branch as _staging_branch
from hfrelease.publish.verify import verify_revision
from hfrelease.redact import redact

TagState = Literal["absent", "released", "elsewhere"]
RepoStatus = Literal["published", "tagged", "already-published", "staged"]
Echo = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class RepoPlan:
    """One repo's part of a release, as read from the Hub before anything is written."""

    bundle: RepoBundle
    main: RemoteRevision | None  # None: the repo does not exist yet
    changes: RepoChanges  # bundle against main
    tag_commit: str | None  # where the release tag points now, if it exists
    tag_state: TagState
    card_diff: str  # unified diff of README.md, Hub's main -> bundle ("" when equal)

    @property
    def repo(self) -> str:
        return self.bundle.repo

    @property
    def action(self) -> str:
        if self.tag_state == "released":
            return "none (already released)"
        if self.main is None:
            return "create repo, commit, tag"
        return "commit, tag" if not self.changes.empty else "tag only (main already holds the bundle)"


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    bundle: FamilyBundle
    endpoint: str
    repos: tuple[RepoPlan, ...]

    @property
    def tag(self) -> str:
        return self.bundle.tag


@dataclass(frozen=True, kw_only=True)
class RepoOutcome:
    repo: str
    status: RepoStatus
    commit: str | None  # the tagged commit (or the staged one, with pr=True)
    staged_ref: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseOutcome:
    tag: str
    status: Literal["published", "already-published", "staged"]
    repos: tuple[RepoOutcome, ...]
    message: str


def _resume_hint(done: str) -> str:
    return (
        f"{done} Re-run the same `hfrelease publish` command to resume: staged repos are reused, nothing "
        "already uploaded is sent again, and no second commit or pull request is made."
    )


def plan_repo(api: HfApi, bundle: RepoBundle, *, tag: str) -> RepoPlan:
    main = read_revision(api, bundle.repo, "main")
    tag_commit: str | None = None
    state: TagState = "absent"
    if main is not None:
        tags = {t.name: t.target_commit for t in api.list_repo_refs(bundle.repo).tags}
        tag_commit = tags.get(tag)
        if tag_commit is not None:
            tagged = read_revision(api, bundle.repo, tag_commit)
            state = "released" if tagged is not None and compare(bundle, tagged).empty else "elsewhere"
    return RepoPlan(
        bundle=bundle, main=main, changes=compare(bundle, main), tag_commit=tag_commit, tag_state=state,
        card_diff=_card_diff(api, bundle, main),
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


def plan_release(bundle: FamilyBundle, api: HfApi) -> ReleasePlan:
    """Read the Hub and diff every repo against the bundle; writes nothing."""
    repos = tuple(plan_repo(api, repo, tag=bundle.tag) for repo in bundle.repos)
    return ReleasePlan(bundle=bundle, endpoint=api.endpoint, repos=repos)


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


def execute_release(
    plan: ReleasePlan, api: HfApi, *, pr: bool = False, run_id: str | None = None, echo: Echo | None = None
) -> ReleaseOutcome:
    """Carry out `plan`: stage and verify all, then (unless `pr`) promote, tag and collect all."""
    say = echo or (lambda _: None)
    run = run_id or uuid.uuid4().hex
    check_tags(plan)
    todo = [r for r in plan.repos if r.tag_state != "released"]
    done = [RepoOutcome(repo=r.repo, status="already-published", commit=r.tag_commit) for r in plan.repos
            if r.tag_state == "released"]  # fmt: skip
    if not todo:
        return ReleaseOutcome(tag=plan.tag, status="already-published", repos=tuple(done),
                              message=f"{plan.tag} is already published: nothing to do")  # fmt: skip
    todo = [_ensure_repo(api, r, private=plan.bundle.private) for r in todo]
    staged = _stage_all(plan, api, todo, pr=pr, run=run, say=say)
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
    concurrent = _check_mains(plan, api, todo)
    outcomes = _promote_and_tag(plan, api, todo, run=run, say=say, concurrent=concurrent)
    for r in todo:
        if r.repo in staged and staged[r.repo].pr_num is None:
            _delete_branch(api, r.repo, _staging_branch(plan.tag))
    _add_to_collection(plan, api, say)
    ours = [o.repo for o in outcomes if o.status in ("published", "tagged")]
    theirs = [o.repo for o in outcomes if o.status == "already-published"]
    overall: Literal["published", "already-published"] = "published" if ours else "already-published"
    message = f"published {plan.tag} ({len(ours)} repos)" if ours else f"{plan.tag} was already published"
    if theirs:
        message += f"; already published by a concurrent run: {', '.join(theirs)}"
    return ReleaseOutcome(tag=plan.tag, status=overall, repos=tuple(done + outcomes), message=message)


def _ensure_repo(api: HfApi, plan: RepoPlan, *, private: bool) -> RepoPlan:
    """Create a missing repo (its initial commit holds only .gitattributes) and diff against its main."""
    if plan.main is not None:
        return plan
    api.create_repo(plan.repo, private=private, exist_ok=True)
    main = read_revision(api, plan.repo, "main")
    if main is None:
        raise PublishError(f"{plan.repo}: created, but its main branch cannot be read")
    return replace(plan, main=main, changes=compare(plan.bundle, main))


def _stage_all(
    plan: ReleasePlan, api: HfApi, todo: list[RepoPlan], *, pr: bool, run: str, say: Echo
) -> dict[str, Staged]:
    staged: dict[str, Staged] = {}
    for number, r in enumerate(todo, start=1):
        if r.changes.empty or r.main is None:
            continue
        try:
            say(f"staging {r.repo} ({number}/{len(todo)}): {r.changes.bytes_to_send} bytes at most")
            if pr:
                result = stage_as_pull_request(api, r.bundle, family=plan.bundle.family, tag=plan.tag, base=r.main,
                                               run_id=run)  # fmt: skip
            else:
                result = stage_on_branch(api, r.bundle, tag=plan.tag, base=r.main, run_id=run)
            verify_revision(api, r.bundle, result.commit)
        except HfreleaseError as error:
            raise PublishError(
                f"staging {r.repo} failed: {redact(error.message)}",
                hint=_resume_hint("No repo's main branch or tags were changed."),
            ) from error
        except Exception as error:
            raise PublishError(
                f"staging {r.repo} failed: {type(error).__name__}: {redact(str(error))}",
                hint=_resume_hint("No repo's main branch or tags were changed."),
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
        now = read_revision(api, r.repo, "main")
        if now is None or now.commit == r.main.commit:
            continue
        if compare(r.bundle, now).empty:
            released_elsewhere[r.repo] = now.commit
            continue
        raise PublishError(
            f"{r.repo}: main moved from {r.main.commit[:12]} to {now.commit[:12]} since the plan was read "
            "(a concurrent change); nothing was overwritten and no main or tag was changed",
            hint="Look at the new commit on the Hub, then run `hfrelease publish` again to plan against it.",
        )
    return released_elsewhere


def _promote_and_tag(
    plan: ReleasePlan, api: HfApi, todo: list[RepoPlan], *, run: str, say: Echo, concurrent: dict[str, str]
) -> list[RepoOutcome]:
    outcomes: list[RepoOutcome] = []
    promoted: list[str] = []
    for r in todo:
        if r.main is None:
            continue
        status: RepoStatus
        try:
            if r.repo in concurrent:
                commit, status = concurrent[r.repo], "already-published"
            elif r.changes.empty:
                commit, status = r.main.commit, "tagged"
            else:
                landed = commit_bundle(api, r.bundle, r.changes.operations(), revision="main", parent=r.main.commit,
                                       title=f"Release {plan.tag}", run_id=run)  # fmt: skip
                commit = landed.commit
                status = "published" if landed.ours else "already-published"
                verify_revision(api, r.bundle, commit, read_back=False)
            promoted.append(r.repo)
            _tag(api, r.repo, plan.tag, commit)
        except StaleParentError:
            raise
        except Exception as error:
            moved = ", ".join(promoted) or "none"
            message = error.message if isinstance(error, HfreleaseError) else f"{type(error).__name__}: {error}"
            raise PublishError(
                f"publishing {r.repo} failed after staging: {redact(message)} (mains already moved: {moved})",
                hint=_resume_hint("Every repo is staged and verified."),
            ) from error
        say(f"{r.repo}: {plan.tag} -> {commit[:12]} ({status})")
        outcomes.append(RepoOutcome(repo=r.repo, status=status, commit=commit))
    return outcomes


def _tag(api: HfApi, repo: str, tag: str, commit: str) -> None:
    """Tag `commit`; an existing tag at the same commit is fine (huggingface_hub's exist_ok does not check)."""
    try:
        api.create_tag(repo, tag=tag, revision=commit, tag_message=f"hfrelease {tag}")
    except HfHubHTTPError as error:
        if error.response is None or error.response.status_code != 409:
            raise
        current = {t.name: t.target_commit for t in api.list_repo_refs(repo).tags}.get(tag)
        if current != commit:
            raise PublishError(
                f"{repo}: tag {tag} was created at {current} by someone else while publishing (expected {commit})",
                hint="Check the repo's tags on the Hub; a release tag must point at the release commit.",
            ) from error


def _delete_branch(api: HfApi, repo: str, branch: str) -> None:
    # Already gone (a concurrent run cleaned up) is fine: the release does not depend on the branch.
    with contextlib.suppress(HfHubHTTPError):
        api.delete_branch(repo, branch=branch)


def _add_to_collection(plan: ReleasePlan, api: HfApi, say: Echo) -> None:
    title = plan.bundle.collection
    if not title:
        return
    collection = api.create_collection(title, namespace=plan.bundle.owner, exists_ok=True,
                                       private=plan.bundle.private)  # fmt: skip
    for r in plan.repos:
        api.add_collection_item(collection.slug, item_id=r.repo, item_type="model", exists_ok=True)
    say(f"collection {collection.slug}: {len(plan.repos)} repos")
