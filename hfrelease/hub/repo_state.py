"""What the Hub server stores, as data: a repository's reference and state (settings, refs, discussions), its
commits and their file entries, and the operations a commit applies; each to and from its JSON file."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hfrelease.hub import errors
from hfrelease.hub.objects import git_blob_oid, lfs_pointer

REPO_TYPES = ("model", "dataset", "space", "kernel")
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}
DEFAULT_BRANCH = "main"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def now_iso() -> str:
    """A timestamp in the one format huggingface_hub's `parse_datetime` expects."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class RepoRef:
    """A repository as the URL names it: type and `namespace/name`."""

    repo_type: str
    repo_id: str

    @property
    def url_path(self) -> str:
        return URL_PREFIXES[self.repo_type] + self.repo_id

    def __str__(self) -> str:
        return f"{self.repo_type}:{self.repo_id}"


def valid_repo_name(name: str) -> bool:
    return bool(_NAME.match(name)) and not name.endswith((".git", ".")) and ".." not in name


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    """A file in a commit: its content (by sha256) and the git oid the Hub reports for it."""

    sha256: str
    size: int
    git_oid: str  # sha1 of the blob; for an LFS file, sha1 of its pointer file (what git stores)
    lfs: bool

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size, "gitOid": self.git_oid, "lfs": self.lfs}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FileEntry:
        return cls(sha256=data["sha256"], size=data["size"], git_oid=data["gitOid"], lfs=data["lfs"])

    @property
    def etag(self) -> str:
        """What `/resolve` sends as ETag: the sha256 for an LFS file, the git oid otherwise (as the Hub)."""
        return self.sha256 if self.lfs else self.git_oid

    @property
    def pointer_size(self) -> int:
        return len(lfs_pointer(self.sha256, self.size))


def regular_entry(content: bytes, sha256: str) -> FileEntry:
    return FileEntry(sha256=sha256, size=len(content), git_oid=git_blob_oid(len(content), [content]), lfs=False)


def lfs_entry(sha256: str, size: int) -> FileEntry:
    pointer = lfs_pointer(sha256, size)
    return FileEntry(sha256=sha256, size=size, git_oid=git_blob_oid(len(pointer), [pointer]), lfs=True)


@dataclass(frozen=True, kw_only=True)
class Commit:
    id: str
    parents: tuple[str, ...]
    title: str
    message: str
    author: str
    date: str
    files: Mapping[str, FileEntry]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parents": list(self.parents),
            "title": self.title,
            "message": self.message,
            "author": self.author,
            "date": self.date,
            "files": {path: entry.to_json() for path, entry in sorted(self.files.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Commit:
        return cls(
            id=data["id"],
            parents=tuple(data["parents"]),
            title=data["title"],
            message=data["message"],
            author=data["author"],
            date=data["date"],
            files={path: FileEntry.from_json(entry) for path, entry in data["files"].items()},
        )


@dataclass(frozen=True)
class AddFile:
    path: str
    entry: FileEntry


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class DeleteFolder:
    path: str


Operation = AddFile | DeleteFile | DeleteFolder


@dataclass(kw_only=True)
class Discussion:
    """A discussion or pull request; `events` are kept in the wire format the Hub sends."""

    num: int
    title: str
    is_pull_request: bool
    status: str
    author: str
    created_at: str
    events: list[dict[str, Any]] = field(default_factory=list)
    base_branch: str | None = None
    fork_point: str | None = None  # commit the PR branch started from: the merge base
    merge_commit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "num": self.num,
            "title": self.title,
            "isPullRequest": self.is_pull_request,
            "status": self.status,
            "author": self.author,
            "createdAt": self.created_at,
            "events": self.events,
            "baseBranch": self.base_branch,
            "forkPoint": self.fork_point,
            "mergeCommit": self.merge_commit,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Discussion:
        return cls(
            num=data["num"],
            title=data["title"],
            is_pull_request=data["isPullRequest"],
            status=data["status"],
            author=data["author"],
            created_at=data["createdAt"],
            events=list(data["events"]),
            base_branch=data.get("baseBranch"),
            fork_point=data.get("forkPoint"),
            merge_commit=data.get("mergeCommit"),
        )

    def add_event(self, kind: str, author: str, data: dict[str, Any]) -> dict[str, Any]:
        event = {
            "id": uuid.uuid4().hex[:24],
            "type": kind,
            "createdAt": now_iso(),
            "author": {"name": author, "type": "user"},
            "data": data,
        }
        self.events.append(event)
        return event

    def add_comment(self, author: str, text: str) -> dict[str, Any]:
        latest = {"raw": text, "html": text, "updatedAt": now_iso(), "author": {"name": author}}
        return self.add_event(
            "comment", author, {"edited": False, "hidden": False, "latest": latest, "numEdits": 0,
                                "editors": [author], "reactions": [], "history": [latest]},
        )  # fmt: skip


@dataclass(kw_only=True)
class RepoState:
    """Everything mutable about a repository, stored in one file so that one `os.replace` changes it."""

    ref: RepoRef
    private: bool
    created_at: str
    author: str
    branches: dict[str, str]
    tags: dict[str, str]
    pull_requests: dict[int, str]
    discussions: list[Discussion]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.ref.repo_type,
            "id": self.ref.repo_id,
            "private": self.private,
            "createdAt": self.created_at,
            "author": self.author,
            "branches": self.branches,
            "tags": self.tags,
            "pullRequests": {str(num): commit for num, commit in self.pull_requests.items()},
            "discussions": [discussion.to_json() for discussion in self.discussions],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RepoState:
        return cls(
            ref=RepoRef(data["type"], data["id"]),
            private=data["private"],
            created_at=data["createdAt"],
            author=data["author"],
            branches=dict(data["branches"]),
            tags=dict(data["tags"]),
            pull_requests={int(num): commit for num, commit in data["pullRequests"].items()},
            discussions=[Discussion.from_json(item) for item in data["discussions"]],
        )

    def discussion(self, num: int) -> Discussion:
        for discussion in self.discussions:
            if discussion.num == num:
                return discussion
        raise errors.HubHTTPError(404, "Discussion not found")


@dataclass(frozen=True)
class CommitOutcome:
    commit: Commit
    pr_num: int | None
