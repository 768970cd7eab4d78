"""What a repo holds at a revision, read through HfApi, and how it compares with a bundle."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.hf_api import RepoFile

from hfrelease.bundle import ATTESTATION_NAME, BundleFile, RepoBundle
from hfrelease.errors import PublishError

_COMMIT_ID = re.compile(r"[0-9a-f]{40}")
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
        # A commit id names itself: asking repo_info for it would be a round trip that says nothing new.
        commit = revision if is_commit_id(revision) else api.repo_info(repo, revision=revision).sha
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


def is_commit_id(revision: str) -> bool:
    return _COMMIT_ID.fullmatch(revision) is not None


def head_commit(api: HfApi, repo: str, revision: str) -> str | None:
    """Where `revision` points now (one request), or None if the repo or revision is missing."""
    try:
        return api.repo_info(repo, revision=revision).sha
    except (RepositoryNotFoundError, RevisionNotFoundError):
        return None


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

    def release_only(self) -> RepoChanges:
        """These changes less the attestation's: what makes a revision another release (`holds_release`)."""
        kept = [f for f in (*self.added, *self.changed) if f.path == ATTESTATION_NAME]
        return RepoChanges(
            added=tuple(f for f in self.added if f.path != ATTESTATION_NAME),
            changed=tuple(f for f in self.changed if f.path != ATTESTATION_NAME),
            deleted=tuple(p for p in self.deleted if p != ATTESTATION_NAME),
            unchanged=(*self.unchanged, *(f.path for f in kept)),
        )

    @property
    def bytes_to_send(self) -> int:
        """An upper bound: the Hub skips content it already stores (e.g. staged earlier, or in another repo)."""
        return sum(f.size for f in (*self.added, *self.changed))

    def operations(self, progress: Progress | None = None) -> list[CommitOperationAdd | CommitOperationDelete]:
        """Fresh commit operations (huggingface_hub marks them committed: they cannot be reused)."""
        ops: list[CommitOperationAdd | CommitOperationDelete] = [
            add_operation(f, progress=progress) for f in (*self.added, *self.changed)
        ]
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


def holds_release(bundle: RepoBundle, remote: RemoteRevision) -> bool:
    """`remote` holds the bundle's release: every file identical, the attestation aside.

    The attestation is not content. Each `actions/attest` run signs the same MANIFEST anew (a fresh
    certificate, signature and transparency-log entry), so a re-run of a publish job that stopped after
    some repos brings another `MANIFEST.sigstore.json` for the very same MANIFEST. The repos it had
    released keep the attestation they were tagged with -- a tag is immutable, and that attestation names
    this MANIFEST's sha256 just as the new one does (`hfrelease verify` checks that it does) -- and the
    repos not yet released ship the new one.
    """
    return compare(bundle, remote).release_only().empty


Progress = Callable[[str, int, int], None]  # (path in repo, bytes read so far, size)
_REPORT_EVERY = 4 * 1024 * 1024  # httpx reads 64 KiB at a time: one report per read would be 16k calls per GB


class ReportingAdd(CommitOperationAdd):
    """A `CommitOperationAdd` that reports how far huggingface_hub has read its file to upload it.

    huggingface_hub opens the file through `as_file` for the LFS PUT (with `with_tqdm=True`, its own bar);
    here the read position is reported instead, so a caller can draw one display for the whole release.
    The file object stays a real file (seekable): huggingface_hub seeks it back to retry a failed PUT.
    """

    progress: Progress | None = None

    @contextlib.contextmanager
    def as_file(self, with_tqdm: bool = False) -> Iterator[BinaryIO]:
        report, source = self.progress, self.path_or_fileobj
        if report is None or not isinstance(source, str | Path):
            with super().as_file(with_tqdm=with_tqdm) as handle:
                yield handle
            return
        size, path = self.upload_info.size, self.path_in_repo
        with open(source, "rb") as handle:  # noqa: PTH123 - the same open huggingface_hub does
            read, last = handle.read, -_REPORT_EVERY

            def reporting_read(count: int | None = -1) -> bytes:
                nonlocal last
                data = read(count)
                position = handle.tell()
                if not data or abs(position - last) >= _REPORT_EVERY or position == size:
                    last = position
                    report(path, position, size)
                return data

            handle.read = reporting_read  # type: ignore[method-assign]
            yield handle


def add_operation(item: BundleFile, *, progress: Progress | None = None) -> CommitOperationAdd:
    """A CommitOperationAdd carrying the bundle's sha256, so huggingface_hub never reads the file to hash it."""
    source: str | bytes = str(item.source) if item.source is not None else item.read()
    operation = ReportingAdd(path_in_repo=item.path, path_or_fileobj=source)
    operation.progress = progress
    if operation.upload_info.size != item.size:
        raise PublishError(
            f"{item.source} changed since it was bundled ({item.size} bytes then, {operation.upload_info.size} now)",
            hint="Wait for whatever writes it to finish, then publish again: the bundle is re-hashed.",
        )
    # huggingface_hub 2.4 hashes lazily (lfs.UploadInfo.sha256): set here, the file is read only to send it.
    operation.upload_info.sha256 = bytes.fromhex(item.sha256)
    return operation
