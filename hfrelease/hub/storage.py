"""File-backed repository store: repositories, commits, refs, pull requests.

Layout under the server root:

    objects/sha256/ab/ab12...           file content, content-addressed (see `objects.py`)
    repos/<type>s/<namespace>/<name>/
        repo.json                       settings, refs (branches, tags, refs/pr/N) and discussions
        commits/<commit id>.json        one immutable record per commit: parents, message, full file map
    tmp/                                staging area for atomic writes

A commit is applied fully or not at all: its file content and commit record are written first (neither is
reachable yet), and only then is `repo.json` replaced with `os.replace`, moving the branch in one step.
`repo.json` also carries the discussions, so "open PR #3 and put a commit on refs/pr/3" lands as one
replace. Writers of one repository are serialized by an in-process lock: one server process owns a root.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hfrelease.hub import errors
from hfrelease.hub.gitattributes import DEFAULT_GITATTRIBUTES
from hfrelease.hub.objects import ObjectStore, atomic_write
from hfrelease.hub.repo_state import (
    DEFAULT_BRANCH,
    AddFile,
    Commit,
    CommitOutcome,
    DeleteFile,
    Discussion,
    FileEntry,
    Operation,
    RepoRef,
    RepoState,
    now_iso,
    regular_entry,
)

_BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_HEX = re.compile(r"^[0-9a-f]{5,40}$")


def _pr_number(revision: str) -> int | None:
    match = re.fullmatch(r"refs/pr/(\d+)", revision)
    return int(match.group(1)) if match else None


class HubStorage:
    """The repositories under one server root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp_dir = root / "tmp"
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.objects = ObjectStore(root / "objects" / "sha256", tmp_dir=self.tmp_dir)
        self._locks: dict[RepoRef, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._commit_cache: dict[str, Commit] = {}

    # -- repositories -------------------------------------------------------------------------------

    def _dir(self, ref: RepoRef) -> Path:
        namespace, name = ref.repo_id.split("/", 1)
        return self.root / "repos" / f"{ref.repo_type}s" / namespace / name

    def lock(self, ref: RepoRef) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(ref, threading.Lock())

    def load(self, ref: RepoRef) -> RepoState:
        try:
            data = json.loads((self._dir(ref) / "repo.json").read_bytes())
        except FileNotFoundError:
            raise errors.repo_not_found() from None
        return RepoState.from_json(data)

    def save(self, state: RepoState) -> None:
        data = json.dumps(state.to_json(), indent=1).encode()
        atomic_write(self._dir(state.ref) / "repo.json", data, tmp_dir=self.tmp_dir)

    def exists(self, ref: RepoRef) -> bool:
        return (self._dir(ref) / "repo.json").is_file()

    def create_repo(self, ref: RepoRef, *, private: bool, author: str) -> RepoState:
        """Create a repository whose `main` holds the Hub's default `.gitattributes`, as the Hub does."""
        with self.lock(ref):
            if self.exists(ref):
                raise errors.conflict(f"You already created this {ref.repo_type} repo")
            content = DEFAULT_GITATTRIBUTES.encode()
            sha256 = self.objects.put_bytes(content)
            first = self._write_commit(
                parents=(),
                files={".gitattributes": regular_entry(content, sha256)},
                title="initial commit",
                message="",
                author=author,
                ref=ref,
            )
            state = RepoState(
                ref=ref, private=private, created_at=now_iso(), author=author,
                branches={DEFAULT_BRANCH: first.id}, tags={}, pull_requests={}, discussions=[],
            )  # fmt: skip
            self.save(state)
            return state

    def delete_repo(self, ref: RepoRef) -> None:
        with self.lock(ref):
            directory = self._dir(ref)
            if not self.exists(ref):
                raise errors.repo_not_found()
            # Rename first so the repository disappears in one step even if the removal is interrupted.
            trash = self.tmp_dir / f"deleted.{uuid.uuid4().hex}"
            directory.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)

    def set_private(self, ref: RepoRef, private: bool) -> None:
        with self.lock(ref):
            state = self.load(ref)
            state.private = private
            self.save(state)

    # -- commits ------------------------------------------------------------------------------------

    def _write_commit(
        self,
        *,
        ref: RepoRef,
        parents: Sequence[str],
        files: Mapping[str, FileEntry],
        title: str,
        message: str,
        author: str,
    ) -> Commit:
        date = now_iso()
        body = {
            "parents": list(parents),
            "files": {path: entry.to_json() for path, entry in sorted(files.items())},
            "title": title,
            "message": message,
            "author": author,
            "date": date,
            "nonce": uuid.uuid4().hex,  # two identical commits in the same millisecond still differ
        }
        commit_id = hashlib.sha1(json.dumps(body, sort_keys=True).encode(), usedforsecurity=False).hexdigest()
        commit = Commit(
            id=commit_id, parents=tuple(parents), title=title, message=message, author=author, date=date,
            files=dict(files),
        )  # fmt: skip
        data = json.dumps(commit.to_json(), indent=1).encode()
        atomic_write(self._dir(ref) / "commits" / f"{commit_id}.json", data, tmp_dir=self.tmp_dir)
        return commit

    def read_commit(self, ref: RepoRef, commit_id: str) -> Commit:
        key = f"{ref}:{commit_id}"
        cached = self._commit_cache.get(key)
        if cached is not None:
            return cached
        path = self._dir(ref) / "commits" / f"{commit_id}.json"
        try:
            commit = Commit.from_json(json.loads(path.read_bytes()))
        except FileNotFoundError:
            raise errors.revision_not_found(commit_id) from None
        self._commit_cache[key] = commit  # commits are immutable: caching can never go stale
        return commit

    def resolve(self, state: RepoState, revision: str) -> str:
        """Commit id of a branch, tag, `refs/...` name, `refs/pr/N`, full or abbreviated commit id."""
        if revision.startswith("refs/heads/"):
            revision_kind, name = "branch", revision.removeprefix("refs/heads/")
        elif revision.startswith("refs/tags/"):
            revision_kind, name = "tag", revision.removeprefix("refs/tags/")
        else:
            revision_kind, name = "any", revision
        pr_num = _pr_number(revision)
        if pr_num is not None and pr_num in state.pull_requests:
            return state.pull_requests[pr_num]
        if revision_kind in ("branch", "any") and name in state.branches:
            return state.branches[name]
        if revision_kind in ("tag", "any") and name in state.tags:
            return state.tags[name]
        if revision_kind == "any" and _HEX.match(revision):
            commits_dir = self._dir(state.ref) / "commits"
            if len(revision) == 40 and (commits_dir / f"{revision}.json").is_file():
                return revision
            if len(revision) >= 7:
                found = [p.stem for p in commits_dir.glob(f"{revision}*.json")]
                if len(found) == 1:
                    return found[0]
        raise errors.revision_not_found(revision)

    def history(self, ref: RepoRef, commit_id: str) -> Iterator[Commit]:
        """Commits reachable by first parents, newest first (the order `list_repo_commits` documents)."""
        current: str | None = commit_id
        while current is not None:
            commit = self.read_commit(ref, current)
            yield commit
            current = commit.parents[0] if commit.parents else None

    def commit(
        self,
        ref: RepoRef,
        revision: str,
        operations: Sequence[Operation],
        *,
        title: str,
        message: str,
        author: str,
        parent_commit: str | None,
        create_pr: bool,
    ) -> CommitOutcome:
        """Apply `operations` on top of `revision` (a branch or `refs/pr/N`), all or nothing."""
        with self.lock(ref):
            state = self.load(ref)
            pr_num = _pr_number(revision)
            branch = revision.removeprefix("refs/heads/")
            if create_pr:
                base_commit = self.resolve(state, parent_commit or revision)
            elif pr_num is not None:
                if pr_num not in state.pull_requests:
                    raise errors.revision_not_found(revision)
                discussion = state.discussion(pr_num)
                if discussion.status not in ("open", "draft"):
                    raise errors.forbidden(f"Pull request #{pr_num} is {discussion.status}")
                base_commit = state.pull_requests[pr_num]
            elif branch in state.branches:
                base_commit = state.branches[branch]
            elif branch in state.tags or _HEX.match(branch):
                raise errors.bad_request(f"Invalid rev id: {revision} is not a branch")
            else:
                raise errors.revision_not_found(revision)

            # The Hub's optimistic-concurrency check: a stale parent gets 412, and nothing is written.
            if parent_commit is not None and not create_pr and not base_commit.startswith(parent_commit.lower()):
                raise errors.HubHTTPError(412, "A commit has happened since. Please refresh and try again.")

            files = dict(self.read_commit(ref, base_commit).files)
            for operation in operations:
                _apply(files, operation, base_commit)
            commit = self._write_commit(
                ref=ref, parents=(base_commit,), files=files, title=title, message=message, author=author
            )

            if create_pr:
                pr_num = 1 + max((d.num for d in state.discussions), default=0)
                discussion = Discussion(
                    num=pr_num, title=title, is_pull_request=True, status="open", author=author,
                    created_at=now_iso(), base_branch=branch, fork_point=base_commit,
                )  # fmt: skip
                discussion.add_comment(author, message or title)
                state.discussions.append(discussion)
            if pr_num is not None:
                state.pull_requests[pr_num] = commit.id
                state.discussion(pr_num).add_event("commit", author, {"subject": title, "oid": commit.id})
            else:
                state.branches[branch] = commit.id
            self.save(state)  # the single step that makes the commit visible
            return CommitOutcome(commit=commit, pr_num=pr_num)

    # -- refs ---------------------------------------------------------------------------------------

    def create_branch(self, ref: RepoRef, branch: str, starting_point: str | None) -> None:
        if not _BRANCH.match(branch) or branch.startswith("refs/") or ".." in branch:
            raise errors.bad_request(f"Invalid reference for a branch: {branch}")
        with self.lock(ref):
            state = self.load(ref)
            if branch in state.branches:
                raise errors.conflict("Reference already exists")
            state.branches[branch] = self.resolve(state, starting_point or DEFAULT_BRANCH)
            self.save(state)

    def delete_branch(self, ref: RepoRef, branch: str) -> None:
        with self.lock(ref):
            state = self.load(ref)
            if branch == DEFAULT_BRANCH:
                raise errors.forbidden("Cannot delete the default branch")
            if branch not in state.branches:
                raise errors.revision_not_found(branch)
            del state.branches[branch]
            self.save(state)

    def create_tag(self, ref: RepoRef, revision: str, tag: str) -> None:
        if not _BRANCH.match(tag) or ".." in tag:
            raise errors.bad_request(f"Invalid tag name: {tag}")
        with self.lock(ref):
            state = self.load(ref)
            if tag in state.tags:
                raise errors.conflict("Tag already exists")
            state.tags[tag] = self.resolve(state, revision)
            self.save(state)

    def delete_tag(self, ref: RepoRef, tag: str) -> None:
        with self.lock(ref):
            state = self.load(ref)
            if tag not in state.tags:
                raise errors.revision_not_found(tag)
            del state.tags[tag]
            self.save(state)

    # -- discussions and pull requests --------------------------------------------------------------

    def create_discussion(
        self, ref: RepoRef, *, title: str, description: str, pull_request: bool, author: str
    ) -> Discussion:
        with self.lock(ref):
            state = self.load(ref)
            num = 1 + max((d.num for d in state.discussions), default=0)
            head = state.branches[DEFAULT_BRANCH]
            # huggingface_hub documents that programmatically created pull requests start as drafts.
            discussion = Discussion(
                num=num, title=title, is_pull_request=pull_request, status="draft" if pull_request else "open",
                author=author, created_at=now_iso(),
                base_branch=DEFAULT_BRANCH if pull_request else None, fork_point=head if pull_request else None,
            )  # fmt: skip
            discussion.add_comment(author, description)
            state.discussions.append(discussion)
            if pull_request:
                state.pull_requests[num] = head
            self.save(state)
            return discussion

    def comment(self, ref: RepoRef, num: int, *, text: str, author: str) -> dict[str, Any]:
        with self.lock(ref):
            state = self.load(ref)
            event = state.discussion(num).add_comment(author, text)
            self.save(state)
            return event

    def change_status(self, ref: RepoRef, num: int, *, status: str, comment: str | None, author: str) -> dict[str, Any]:
        with self.lock(ref):
            state = self.load(ref)
            discussion = state.discussion(num)
            if discussion.status == "merged":
                raise errors.forbidden("A merged pull request cannot change status")
            if comment:
                discussion.add_comment(author, comment)
            discussion.status = status
            event = discussion.add_event("status-change", author, {"status": status})
            self.save(state)
            return event

    def merge(self, ref: RepoRef, num: int, *, comment: str | None, author: str) -> dict[str, Any]:
        """Three-way merge of `refs/pr/N` into its base branch; a path changed on both sides is a conflict."""
        with self.lock(ref):
            state = self.load(ref)
            discussion = state.discussion(num)
            if not discussion.is_pull_request:
                raise errors.bad_request("This discussion is not a pull request")
            if discussion.status not in ("open", "draft"):
                raise errors.forbidden(f"Pull request #{num} is {discussion.status}")
            base_branch = discussion.base_branch or DEFAULT_BRANCH
            if base_branch not in state.branches:
                raise errors.revision_not_found(base_branch)
            ours_id, theirs_id = state.branches[base_branch], state.pull_requests[num]
            fork = self.read_commit(ref, discussion.fork_point or ours_id).files
            ours, theirs = self.read_commit(ref, ours_id).files, self.read_commit(ref, theirs_id).files
            merged: dict[str, FileEntry] = {}
            conflicts = []
            for path in sorted(set(fork) | set(ours) | set(theirs)):
                base, mine, pr = fork.get(path), ours.get(path), theirs.get(path)
                if pr in (mine, base):  # same on both sides, or untouched by the PR
                    picked = mine
                elif base == mine:  # changed by the PR only (None means: the PR deleted it)
                    picked = pr
                else:
                    conflicts.append(path)
                    continue
                if picked is not None:
                    merged[path] = picked
            if conflicts:
                raise errors.conflict(f"Merge conflict in: {', '.join(conflicts)}")
            commit = self._write_commit(
                ref=ref, parents=(ours_id, theirs_id), files=merged, title=discussion.title,
                message=f"Merge pull request #{num}", author=author,
            )  # fmt: skip
            state.branches[base_branch] = commit.id
            if comment:
                discussion.add_comment(author, comment)
            discussion.status = "merged"
            discussion.merge_commit = commit.id
            event = discussion.add_event("status-change", author, {"status": "merged"})
            self.save(state)
            return event


def _apply(files: dict[str, FileEntry], operation: Operation, base_commit: str) -> None:
    if isinstance(operation, AddFile):
        # A file cannot also be a folder: adding `a/b` where `a/b/c` exists (or `a` where `a/x` is) fails.
        if any(existing.startswith(operation.path + "/") for existing in files):
            raise errors.bad_request(f"'{operation.path}' is a folder in this revision")
        files[operation.path] = operation.entry
    elif isinstance(operation, DeleteFile):
        if operation.path not in files:
            raise errors.HubHTTPError(
                404, f"A file with this name doesn't exist: {operation.path}", code="EntryNotFound",
                headers={"X-Repo-Commit": base_commit},
            )  # fmt: skip
        del files[operation.path]
    else:
        prefix = operation.path.rstrip("/") + "/"
        doomed = [path for path in files if path.startswith(prefix)]
        if not doomed:
            raise errors.HubHTTPError(
                404, f"A folder with this name doesn't exist: {operation.path}", code="EntryNotFound",
                headers={"X-Repo-Commit": base_commit},
            )  # fmt: skip
        for path in doomed:
            del files[path]
