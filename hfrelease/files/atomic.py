"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same directory, fsync, then `os.replace`.

    The temp file is in the same directory so the rename never crosses a filesystem (only then is it
    atomic); its name starts with "." and ends in ".tmp" so ledger globs (`*.json`) never pick it up.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    # os.open with an explicit 0o666 (not tempfile.mkstemp, which creates 0o600) so the umask decides
    # the permissions, as for any other file: records are committed and read by other users and CI.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; not every platform lets a
    # directory be opened (Windows), and there the rename is as durable as it gets.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
