"""What a repo holds at a revision, read through HfApi, and how it compares with a bundle."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.hf_api import RepoFile

from hfrelease.bundle import BundleFile, RepoBundle
from hfrelease.errors import PublishError

KEPT = (".gitattributes",)  # the Hub's own file: never deleted, never in a MANIFEST


@dataclass(frozen=True, kw_only=True)
class RemoteFile:
    path: str
    size: int
    sha256: str | None  # LFS files only; regular files are known by their git blob id
    blob_id: str


@dataclass(frozen=True, kw_only=True)
class RemoteRevision:
    commit: str
    files: Mapping[str, RemoteFile]


def read_revision(api: HfApi, repo: str, revision: str) -> RemoteRevision | None:
    """The files at `revision` (a branch, tag, PR ref or commit), or None if the repo or revision is missing."""
    try:
        commit = api.repo_info(repo, revision=revision).sha
        if commit is None:
            return None
        # Listed at the commit id, not the ref: a ref moving between the two calls cannot mix two trees.
        entries = api.list_repo_tree(repo, revision=commit, recursive=True)
        files = {
            e.path: RemoteFile(path=e.path, size=e.size, sha256=e.lfs.sha256 if e.lfs else None, blob_id=e.blob_id)
            for e in entries
            if isinstance(e, RepoFile)
        }
    except (RepositoryNotFoundError, RevisionNotFoundError):
        return None
    return RemoteRevision(commit=commit, files=files)


def git_blob_id(content: bytes) -> str:
    """The id git (and the Hub) gives a regular file: sha1 of "blob <size>\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def same_content(local: BundleFile, remote: RemoteFile) -> bool:
    if local.size != remote.size:
        return False
    if remote.sha256 is not None:
        return remote.sha256 == local.sha256
    # A regular (non-LFS) file is small (< 10 MiB): reading it for its git id is cheap, weights are never here.
    return git_blob_id(local.read()) == remote.blob_id


@dataclass(frozen=True, kw_only=True)
class RepoChanges:
    """A bundle against a revision: what a commit must add, change and delete."""

    added: tuple[BundleFile, ...]
    changed: tuple[BundleFile, ...]
    deleted: tuple[str, ...]
    unchanged: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.deleted)

    @property
    def bytes_to_send(self) -> int:
        """An upper bound: the Hub skips content it already stores (e.g. staged earlier, or in another repo)."""
        return sum(f.size for f in (*self.added, *self.changed))

    def operations(self) -> list[CommitOperationAdd | CommitOperationDelete]:
        """Fresh commit operations (huggingface_hub marks them committed: they cannot be reused)."""
        ops: list[CommitOperationAdd | CommitOperationDelete] = [add_operation(f) for f in (*self.added, *self.changed)]
        ops += [CommitOperationDelete(path_in_repo=path) for path in self.deleted]
        return ops


def compare(bundle: RepoBundle, remote: RemoteRevision | None) -> RepoChanges:
    files = remote.files if remote is not None else {}
    added, changed, unchanged = [], [], []
    for item in bundle.files:
        there = files.get(item.path)
        if there is None:
            added.append(item)
        elif same_content(item, there):
            unchanged.append(item.path)
        else:
            changed.append(item)
    wanted = {f.path for f in bundle.files}
    deleted = sorted(p for p in files if p not in wanted and p not in KEPT)
    return RepoChanges(added=tuple(added), changed=tuple(changed), deleted=tuple(deleted), unchanged=tuple(unchanged))


def add_operation(item: BundleFile) -> CommitOperationAdd:
    """A CommitOperationAdd carrying the bundle's sha256, so huggingface_hub never reads the file to hash it."""
    source: str | bytes = str(item.source) if item.source is not None else item.read()
    operation = CommitOperationAdd(path_in_repo=item.path, path_or_fileobj=source)
    if operation.upload_info.size != item.size:
        raise PublishError(
            f"{item.source} changed since it was bundled ({item.size} bytes then, {operation.upload_info.size} now)",
            hint="Wait for whatever writes it to finish, then publish again: the bundle is re-hashed.",
        )
    # huggingface_hub 2.4 hashes lazily (lfs.UploadInfo.sha256): set here, the file is read only to send it.
    operation.upload_info.sha256 = bytes.fromhex(item.sha256)
    return operation
