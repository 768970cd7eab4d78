"""Content-addressed file store and the atomic-write primitive every other record uses.

File content is stored once, under its sha256, whatever repo or path it was committed to: re-publishing the
same bytes costs no upload (the LFS batch answer says the object is already there) and no disk.

Durability: a write goes to a temporary file in `<root>/tmp` (same filesystem as its destination), is
fsynced, then `os.replace`d into place and the directory fsynced; a reader sees the old file or the new
one, never a torn one, even across a crash.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

_CHUNK = 1024 * 1024


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` survive a power loss (POSIX requires syncing the directory too)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, tmp_dir: Path) -> None:
    """Replace `path` with `data` in one step: readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f"{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def git_blob_oid(size: int, chunks: Iterable[bytes]) -> str:
    """Git's object id of a blob: sha1 of `blob <size>\\0<content>` (what the Hub reports as a file's `oid`)."""
    digest = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file git stores in place of an LFS file; its git oid is the file's tree `oid`."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


class ObjectStore:
    """Blobs under `<root>/objects/sha256/ab/abcdef...`, written once and never modified."""

    def __init__(self, root: Path, *, tmp_dir: Path) -> None:
        self.root = root
        self.tmp_dir = tmp_dir
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def size(self, sha256: str) -> int:
        return self.path(sha256).stat().st_size

    def put_bytes(self, data: bytes) -> str:
        """Store `data`; return its sha256. Storing bytes already present is a no-op."""
        sha256 = hashlib.sha256(data).hexdigest()
        if not self.exists(sha256):
            atomic_write(self.path(sha256), data, tmp_dir=self.tmp_dir)
        return sha256

    def put_chunks(self, chunks: Iterable[bytes]) -> tuple[str, int]:
        """Store the concatenation of `chunks`; return (sha256, size).

        The content is hashed while it is spooled to a temporary file, so a large upload is never held in
        memory; if the client goes away mid-body the exception propagates and nothing is left behind.
        """
        digest = hashlib.sha256()
        tmp = self.tmp_dir / f"upload.{uuid.uuid4().hex}.tmp"
        size = 0
        try:
            with tmp.open("wb") as handle:
                for chunk in chunks:
                    digest.update(chunk)
                    handle.write(chunk)
                    size += len(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            sha256 = digest.hexdigest()
            if not self.exists(sha256):
                target = self.path(sha256)
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp.replace(target)
                fsync_dir(target.parent)
            return sha256, size
        finally:
            tmp.unlink(missing_ok=True)

    def git_oid(self, sha256: str) -> str:
        path = self.path(sha256)
        size = path.stat().st_size
        with path.open("rb") as handle:
            return git_blob_oid(size, iter(lambda: handle.read(_CHUNK), b""))
