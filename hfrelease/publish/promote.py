"""The last steps of a release, once every repo is staged: commit each main, tag it, clean up after it.

Per repo: one `create_commit` on main with `parent_commit` = the main the plan read, the tag at exactly
that commit, then the staging branch deleted and a pull request an earlier `--pr` run opened for this
release closed, with a comment naming the commit on main that carries the release.

Why closed, not merged: merging makes the Hub write a commit of its own on main, so main would no longer
be the tagged, verified commit (and a merge has no `parent_commit` check against a concurrent change).
The pull request's content is on main already; the comment says where.

A failure here leaves some repos released and others not (the Hub has no multi-repo transaction). The
error lists every repo's state and the command that resumes: its re-run plans again, finds the released
repos released (their tag is on the bundle), commits the others from what was staged and tags each once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from hfrelease.errors import PublishError
from hfrelease.hub_errors import SCOPE_HINT, describe, is_auth_failure
from hfrelease.publish.events import OnEvent, StepDone, StepStarted
from hfrelease.publish.readback import verify_revision
from hfrelease.publish.remote import head_commit
from hfrelease.publish.staging import Staged, StaleParentError, commit_bundle, staging_branch
from hfrelease.redact import redact

if TYPE_CHECKING:
    from hfrelease.publish.plan import ReleasePlan, RepoPlan

RepoStatus = Literal["published", "tagged", "already-published", "staged"]


@dataclass(frozen=True, kw_only=True)
class RepoOutcome:
    repo: str
    status: RepoStatus
    commit: str | None  # the tagged commit (or the staged one, with pr=True)
    staged_ref: str | None = None


def resume_hint(done: str, command: str) -> str:
    return (
        f"{done} Re-run {command if command.startswith('the ') else f'`{command}`'} to resume: staged repos are "
        "reused, nothing already uploaded is sent again, and no second commit or pull request is made."
    )


def promote_and_tag(
    plan: ReleasePlan,
    api: HfApi,
    todo: Sequence[RepoPlan],
    staged: Mapping[str, Staged],
    *,
    run: str,
    say: Callable[[str], None],
    emit: OnEvent,
    concurrent: Mapping[str, str],
    resume: str,
) -> list[RepoOutcome]:
    """Commit and tag every repo of `todo`, in order; a failure raises with every repo's state."""
    # What each repo holds right now, for the error message should a later repo fail.
    states = {r.repo: _staged_state(r, staged.get(r.repo)) for r in todo}
    outcomes: list[RepoOutcome] = []
    for r in todo:
        if r.main is None:
            continue
        status: RepoStatus
        try:
            emit(StepStarted(repo=r.repo, step="promote"))
            if r.repo in concurrent:
                commit, status = concurrent[r.repo], "already-published"
            elif r.changes.empty:
                commit, status = r.main.commit, "tagged"
            else:
                landed = commit_bundle(api, r.bundle, r.changes.operations(), revision="main", parent=r.main.commit,
                                       title=_release_title(plan.tag, r), run_id=run, note=r.commit_note())  # fmt: skip
                commit = landed.commit
                status = "published" if landed.ours else "already-published"
                states[r.repo] = f"main committed at {commit[:12]}, not tagged yet"
                verify_revision(api, r.bundle, commit, read_back=False, any_attestation=not landed.ours)
            emit(StepDone(repo=r.repo, step="promote", commit=commit, detail=status))
            emit(StepStarted(repo=r.repo, step="tag"))
            _tag(api, r.repo, plan.tag, commit, note=r.commit_note())
            states[r.repo] = f"released: main at {commit[:12]}, tagged {plan.tag}"
        except Exception as error:
            # What each repo holds is read back from the Hub, not taken from what this run believes: a lost
            # reply (a tag or commit the Hub made, its answer never received) must not be reported as undone.
            states = read_back_states(api, plan.tag, todo, staged, believed=states)
            states[r.repo] = f"FAILED HERE, {states[r.repo]}"
            lines = "\n".join(f"  - {repo}: {state}" for repo, state in states.items())
            message = describe(error)
            if isinstance(error, StaleParentError):
                # A concurrent change: re-running plans against it, so the same command still resumes.
                raise StaleParentError(f"{redact(message)}\nstate of each repo:\n{lines}", hint=error.hint) from error
            done = "Released repos stay as they are; the others are still staged and verified."
            raise PublishError(
                f"publishing {r.repo} failed after every repo was staged: {redact(message)}\n"
                f"state of each repo (read back from the Hub):\n{lines}",
                hint=(SCOPE_HINT + " " if is_auth_failure(error) else "") + resume_hint(done, resume),
            ) from error
        emit(StepDone(repo=r.repo, step="tag", commit=commit, detail=plan.tag))
        say(f"{r.repo}: {plan.tag} -> {commit[:12]} ({status})")
        outcomes.append(RepoOutcome(repo=r.repo, status=status, commit=commit))
        # Cleaning up is not part of the release: a failure here is left for the next run to retry.
        used = staged.get(r.repo)
        if r.staging_left or (used is not None and used.pr_num is None):
            _delete_branch(api, r.repo, staging_branch(plan.tag))
        for number in sorted({n for n in (r.open_pr, used.pr_num if used else None) if n is not None}):
            close_pull_request(api, r.repo, number, tag=plan.tag, commit=commit, say=say)
    return outcomes


def read_back_states(
    api: HfApi, tag: str, todo: Sequence[RepoPlan], staged: Mapping[str, Staged], *, believed: Mapping[str, str]
) -> dict[str, str]:
    """Each repo's state as the Hub holds it now: where main is and whether `tag` is on it.

    A repo the Hub cannot be read for keeps what this run believes, marked as such.
    """
    states: dict[str, str] = {}
    for r in todo:
        try:
            main = head_commit(api, r.repo, "main")
            tagged = {t.name: t.target_commit for t in api.list_repo_refs(r.repo).tags}.get(tag)
        except Exception:  # the report must still be made; the belief is marked as unconfirmed
            states[r.repo] = f"{believed[r.repo]} (as last known: the Hub could not be read back)"
            continue
        before = r.main.commit if r.main else None
        if tagged is not None:
            where = f"main at {main[:12]}" if main else "main unreadable"
            at = "" if tagged == main else f" at {tagged[:12]}"
            states[r.repo] = f"released: {where}, tagged {tag}{at}"
        elif main is not None and main != before:
            states[r.repo] = f"main committed at {main[:12]}, not tagged yet"
        else:
            states[r.repo] = _staged_state(r, staged.get(r.repo))
    return states


def _staged_state(r: RepoPlan, staged: Staged | None) -> str:
    main = r.main.commit[:12] if r.main else "none"
    if staged is None:
        return f"main already holds the bundle at {main}, not tagged yet"
    return f"staged at {staged.ref} ({staged.commit[:12]}), main untouched at {main}"


def tidy_released(tag: str, api: HfApi, released: Iterable[RepoPlan], *, say: Callable[[str], None]) -> None:
    """On repos already released: close this release's open pull request and delete a left staging branch."""
    for r in released:
        if r.staging_left:
            _delete_branch(api, r.repo, staging_branch(tag))
        if r.open_pr is not None and r.tag_commit is not None:
            close_pull_request(api, r.repo, r.open_pr, tag=tag, commit=r.tag_commit, say=say)


def close_pull_request(
    api: HfApi, repo: str, number: int, *, tag: str, commit: str, say: Callable[[str], None]
) -> None:
    """Close pull request `number`, saying which commit on main carries the release it staged."""
    comment = (
        f"Released as {tag}: commit {commit} on main carries this release, and tag {tag} points at it. "
        "Closed by hfrelease rather than merged, so that main stays exactly the tagged, verified commit."
    )
    try:
        api.change_discussion_status(repo, number, "closed", comment=comment)
    except HfHubHTTPError as error:
        # The release is complete either way; the pull request is found open again by the next run.
        say(f"{repo}: could not close pull request #{number} ({redact(str(error))}); the next run retries")
        return
    say(f"{repo}: pull request #{number} closed ({tag} is on main at {commit[:12]})")


def _release_title(tag: str, r: RepoPlan) -> str:
    """The release commit's title; it says when the artifact is published with failed gates (listed below it)."""
    if not r.failed_gates:
        return f"Release {tag}"
    return f"Release {tag} (--allow-failed-gates: {len(r.failed_gates)} gate(s) failed, listed below)"


def _tag(api: HfApi, repo: str, tag: str, commit: str, *, note: str = "") -> None:
    """Tag `commit`, safe against a lost answer; an existing tag at the same commit is fine.

    When the request fails, the tags are read back and decide: the Hub may have made the tag and the
    answer been lost (a dropped connection, a 5xx after the write), or a concurrent run of this release
    made it first (409; huggingface_hub's exist_ok does not check where an existing tag points).
    `note`: the failed gates a release was published with, said in the tag's message as in its commit's
    (a repo whose main already held the bundle gets no commit, only the tag).
    """
    try:
        api.create_tag(repo, tag=tag, revision=commit, tag_message=f"hfrelease {tag}" + (f"\n\n{note}" if note else ""))
    except Exception as error:
        try:
            current = {t.name: t.target_commit for t in api.list_repo_refs(repo).tags}.get(tag)
        except Exception:  # unreadable: the tag request's own failure is what to report
            raise error from None
        if current == commit:
            return
        if current is not None:
            raise PublishError(
                f"{repo}: tag {tag} was created at {current} by someone else while publishing (expected {commit})",
                hint="Check the repo's tags on the Hub; a release tag must point at the release commit.",
            ) from error
        raise


def _delete_branch(api: HfApi, repo: str, branch: str) -> None:
    # Already gone (a concurrent run cleaned up) is fine: the release does not depend on the branch.
    with contextlib.suppress(HfHubHTTPError):
        api.delete_branch(repo, branch=branch)
