"""Stage one repo's release where main cannot see it: a branch `hfrelease/staging/<tag>`, or a pull request.

Staging is where the bytes move, so it is where faults land; main and tags are touched only once every
repo of the family is staged and verified (`release.py`). Staging is idempotent: a branch or pull request
that already holds the bundle is reused without a commit, one holding something else gets one commit on
top, so a re-run after a failure uploads only what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import HfHubHTTPError

from hfrelease.bundle import RepoBundle
from hfrelease.errors import PublishError
from hfrelease.publish.remote import Progress, RemoteRevision, compare, holds_release, read_revision

STAGING_PREFIX = "hfrelease/staging/"
RUN_MARKER = "hfrelease-run:"


def staging_branch(tag: str) -> str:
    return f"{STAGING_PREFIX}{tag}"


def pr_title(family: str, tag: str) -> str:
    return f"hfrelease: {family} {tag}"


@dataclass(frozen=True, kw_only=True)
class Staged:
    repo: str
    ref: str  # the staging branch, or refs/pr/N
    commit: str
    pr_num: int | None
    committed: bool  # False when the ref already held the bundle


@dataclass(frozen=True, kw_only=True)
class Landed:
    commit: str
    ours: bool  # False: another run made a commit with exactly this content (a concurrent publish)


class StaleParentError(PublishError):
    """The ref moved since it was read, to content that is not the bundle: a concurrent change."""


def _status(error: Exception) -> int | None:
    return error.response.status_code if isinstance(error, HfHubHTTPError) and error.response is not None else None


def _description(note: str, run_id: str) -> str:
    return f"{note}\n\n{RUN_MARKER} {run_id}" if note else f"{RUN_MARKER} {run_id}"


def commit_message(api: HfApi, repo: str, commit: str) -> str:
    entries = api.list_repo_commits(repo, revision=commit)
    return entries[0].message if entries else ""


def commit_bundle(
    api: HfApi,
    bundle: RepoBundle,
    operations: Sequence[CommitOperationAdd | CommitOperationDelete],
    *,
    revision: str,
    parent: str,
    title: str,
    run_id: str,
    note: str = "",
) -> Landed:
    """One `create_commit` on `revision` with `parent_commit=parent`, safe against a lost answer.

    `note` opens the commit's description (the failed gates a release was published with).

    The commit POST is not retried by huggingface_hub (a retry could commit twice). When it fails, the ref
    is read back: if it now holds exactly the bundle, the commit landed (ours if it carries this run's id,
    else a concurrent run's), otherwise the failure stands and nothing was overwritten.
    """
    try:
        info = api.create_commit(
            bundle.repo, list(operations), commit_message=title, commit_description=_description(note, run_id),
            revision=revision, parent_commit=parent,
        )  # fmt: skip
    except Exception as error:
        after = read_revision(api, bundle.repo, revision)
        if after is not None and after.commit != parent and holds_release(bundle, after):
            return Landed(commit=after.commit, ours=run_id in commit_message(api, bundle.repo, after.commit))
        if _status(error) == 412 or (after is not None and after.commit != parent):
            raise StaleParentError(
                f"{bundle.repo}: {revision} moved from {parent[:12]} to "
                f"{after.commit[:12] if after else 'nowhere'} while publishing (a concurrent change); "
                "nothing was overwritten",
                hint="Look at what changed on the Hub, then run `hfrelease publish` again: it plans against the "
                "new state.",
            ) from error
        raise
    # huggingface_hub skips the commit (and returns the ref's head) when the ref already holds every file,
    # which is what a concurrent run that committed first looks like: the head then is not ours. It marks
    # the additions it did commit (`_is_committed`, which makes it refuse to reuse them); reading that
    # mark saves reading the commit's message back, one request per commit. Without the mark (another
    # huggingface_hub version, or a commit of deletions only) the message decides.
    marks = [getattr(op, "_is_committed", None) for op in operations if isinstance(op, CommitOperationAdd)]
    if marks and all(isinstance(mark, bool) for mark in marks):
        return Landed(commit=info.oid, ours=any(marks))
    return Landed(commit=info.oid, ours=run_id in commit_message(api, bundle.repo, info.oid))


def stage_on_branch(
    api: HfApi, bundle: RepoBundle, *, tag: str, base: RemoteRevision, run_id: str, progress: Progress | None = None,
    exists: bool = True, note: str = "",
) -> Staged:  # fmt: skip
    """The bundle committed on the staging branch (created at `base` if missing).

    `exists=False`: the plan's refs showed no staging branch, so it is not read before being created (a
    branch a concurrent run created since makes that a 409, and then it is read).
    """
    branch = staging_branch(tag)
    current = read_revision(api, bundle.repo, branch) if exists else None
    if current is None:
        try:
            api.create_branch(bundle.repo, branch=branch, revision=base.commit)
            # Created here at `base`, whose files were read at that very commit: no need to read them again.
            current = base
        except HfHubHTTPError as error:
            if _status(error) != 409:  # 409: a concurrent run created it first, which is fine
                raise
            current = read_revision(api, bundle.repo, branch)
        if current is None:
            raise PublishError(f"{bundle.repo}: the staging branch {branch} vanished right after it was created")
    changes = compare(bundle, current)
    if changes.empty:
        return Staged(repo=bundle.repo, ref=branch, commit=current.commit, pr_num=None, committed=False)
    landed = commit_bundle(
        api, bundle, changes.operations(progress), revision=branch, parent=current.commit, title=f"Stage {tag}",
        run_id=run_id, note=note,
    )  # fmt: skip
    return Staged(repo=bundle.repo, ref=branch, commit=landed.commit, pr_num=None, committed=landed.ours)


def find_pull_request(api: HfApi, repo: str, title: str) -> int | None:
    for discussion in api.get_repo_discussions(repo, discussion_type="pull_request"):
        if discussion.title == title and discussion.status in ("open", "draft"):
            return discussion.num
    return None


def stage_as_pull_request(
    api: HfApi, bundle: RepoBundle, *, family: str, tag: str, base: RemoteRevision, run_id: str,
    progress: Progress | None = None, note: str = "",
) -> Staged:  # fmt: skip
    """The bundle as an open pull request against main: reused (or updated) if one for this tag is open."""
    title = pr_title(family, tag)
    number = find_pull_request(api, bundle.repo, title)
    if number is not None:
        ref = f"refs/pr/{number}"
        current = read_revision(api, bundle.repo, ref)
        if current is None:
            raise PublishError(f"{bundle.repo}: pull request #{number} has no revision {ref}")
        changes = compare(bundle, current)
        if changes.empty:
            return Staged(repo=bundle.repo, ref=ref, commit=current.commit, pr_num=number, committed=False)
        landed = commit_bundle(
            api, bundle, changes.operations(progress), revision=ref, parent=current.commit, title=title, run_id=run_id,
            note=note,
        )
        return Staged(repo=bundle.repo, ref=ref, commit=landed.commit, pr_num=number, committed=True)
    try:
        info = api.create_commit(
            bundle.repo, compare(bundle, base).operations(progress), commit_message=title,
            commit_description=f"Release {tag} staged for review by hfrelease.\n\n{_description(note, run_id)}",
            create_pr=True, parent_commit=base.commit,
        )  # fmt: skip
    except Exception:
        # A lost answer: the pull request may exist all the same. Never open a second one.
        number = find_pull_request(api, bundle.repo, title)
        if number is None:
            raise
    else:
        number = info.pr_num
    if number is None:
        raise PublishError(f"{bundle.repo}: the Hub opened no pull request for {tag}")
    ref = f"refs/pr/{number}"
    current = read_revision(api, bundle.repo, ref)
    if current is None:
        raise PublishError(f"{bundle.repo}: pull request #{number} has no revision {ref}")
    return Staged(repo=bundle.repo, ref=ref, commit=current.commit, pr_num=number, committed=True)
