"""The JSON shapes the Hub answers with, as huggingface_hub parses them (`hf_api.py`, `community.py`).

Pure functions from stored records to dictionaries; `base_url` is the address the client used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from hfrelease.hub.repo_state import Commit, Discussion, FileEntry, RepoRef, RepoState


def repo_url(base_url: str, ref: RepoRef) -> str:
    return f"{base_url}/{ref.url_path}"


def whoami(user: str) -> dict[str, Any]:
    return {
        "type": "user",
        "id": hashlib.sha1(user.encode(), usedforsecurity=False).hexdigest()[:24],
        "name": user,
        "fullname": user,
        "email": None,
        "emailVerified": False,
        "isPro": False,
        "orgs": [],
        "auth": {"type": "access_token", "accessToken": {"displayName": "hfrelease-hub", "role": "write"}},
    }


def _lfs(entry: FileEntry) -> dict[str, Any]:
    return {"oid": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}


def sibling(path: str, entry: FileEntry, *, blobs: bool) -> dict[str, Any]:
    if not blobs:
        return {"rfilename": path}
    data: dict[str, Any] = {"rfilename": path, "size": entry.size, "blobId": entry.git_oid}
    if entry.lfs:
        data["lfs"] = {"sha256": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}
    return data


def repo_info(state: RepoState, commit: Commit, *, blobs: bool) -> dict[str, Any]:
    ref = state.ref
    namespace = ref.repo_id.split("/", 1)[0]
    data: dict[str, Any] = {
        "_id": hashlib.sha1(str(ref).encode(), usedforsecurity=False).hexdigest()[:24],
        "id": ref.repo_id,
        "author": namespace,
        "sha": commit.id,
        "lastModified": commit.date,
        "createdAt": state.created_at,
        "private": state.private,
        "gated": False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "siblings": [sibling(p, e, blobs=blobs) for p, e in sorted(commit.files.items())],
        "usedStorage": sum(entry.size for entry in commit.files.values()),
    }
    if ref.repo_type == "model":
        data["modelId"] = ref.repo_id
    if ref.repo_type == "space":
        data["sdk"] = "static"
    return data


def last_commit(commit: Commit) -> dict[str, Any]:
    return {"id": commit.id, "title": commit.title, "date": commit.date}


def file_entry(path: str, entry: FileEntry, last: Commit | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"type": "file", "oid": entry.git_oid, "size": entry.size, "path": path}
    if entry.lfs:
        data["lfs"] = _lfs(entry)
    if last is not None:
        data["lastCommit"] = last_commit(last)
    return data


def folder_entry(path: str, files: Mapping[str, FileEntry], last: Commit | None = None) -> dict[str, Any]:
    # A stable stand-in for git's tree id: it changes exactly when something below the folder changes.
    prefix = path + "/"
    listing = "".join(f"{p}\0{e.git_oid}\n" for p, e in sorted(files.items()) if p.startswith(prefix))
    data: dict[str, Any] = {
        "type": "directory",
        "oid": hashlib.sha1(listing.encode(), usedforsecurity=False).hexdigest(),
        "size": 0,
        "path": path,
    }
    if last is not None:
        data["lastCommit"] = last_commit(last)
    return data


def git_commit(commit: Commit) -> dict[str, Any]:
    return {
        "id": commit.id,
        "title": commit.title,
        "message": commit.message,
        "authors": [{"user": commit.author}],
        "date": commit.date,
        "formatted": {"title": commit.title, "message": commit.message},
    }


def refs(state: RepoState, *, include_prs: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "branches": [
            {"name": name, "ref": f"refs/heads/{name}", "targetCommit": target}
            for name, target in sorted(state.branches.items())
        ],
        "converts": [],
        "tags": [
            {"name": name, "ref": f"refs/tags/{name}", "targetCommit": target}
            for name, target in sorted(state.tags.items())
        ],
    }
    if include_prs:
        data["pullRequests"] = [
            {"name": f"refs/pr/{num}", "ref": f"refs/pr/{num}", "targetCommit": target}
            for num, target in sorted(state.pull_requests.items())
        ]
    return data


def discussion_summary(ref: RepoRef, discussion: Discussion) -> dict[str, Any]:
    return {
        "num": discussion.num,
        "title": discussion.title,
        "status": discussion.status,
        "isPullRequest": discussion.is_pull_request,
        "createdAt": discussion.created_at,
        "author": {"name": discussion.author, "type": "user"},
        "repo": {"name": ref.repo_id, "type": ref.repo_type},
        "pinned": False,
        "numComments": sum(1 for e in discussion.events if e["type"] == "comment"),
    }


def discussion_details(state: RepoState, discussion: Discussion, *, diff: str | None) -> dict[str, Any]:
    data = discussion_summary(state.ref, discussion)
    data["events"] = discussion.events
    if discussion.is_pull_request:
        changes: dict[str, Any] = {"base": f"refs/heads/{discussion.base_branch}"}
        if discussion.merge_commit is not None:
            changes["mergeCommitId"] = discussion.merge_commit
        data["changes"] = changes
        data["filesWithConflicts"] = []
        data["diff"] = diff
    return data


def file_diff(before: Mapping[str, FileEntry], after: Mapping[str, FileEntry]) -> str:
    """A git-style summary of which files a pull request changes (content diffs are not rendered)."""
    lines = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old != new:
            lines.append(f"diff --git a/{path} b/{path}")
            lines.append(f"index {old.git_oid if old else '0' * 40}..{new.git_oid if new else '0' * 40}")
    return "\n".join(lines) + ("\n" if lines else "")


def changed_paths(commit: Commit, parent: Commit | None) -> Iterable[str]:
    before = parent.files if parent is not None else {}
    return [p for p in set(before) | set(commit.files) if before.get(p) != commit.files.get(p)]
