"""The `MANIFEST` file each published repo carries: sha256, size and path of every other file in it.

Plain text, one file per line, sorted by path, so anyone can check a download without hfrelease:

    # hfrelease MANIFEST 1
    # family: demo 1.0 (tag v1.0), artifact: fp8-dynamic
    # weights sha256: 3b1f...  (the artifact content hash ledger records and cards cite)
    <sha256> <size> <path>

    grep -v '^#' MANIFEST | sed -E 's/^([0-9a-f]{64}) [0-9]+ /\\1  /' | sha256sum -c

The content is a pure function of the files (no dates, no host names), so re-bundling unchanged files
gives the same bytes and a re-publish has nothing to upload.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hfrelease.files.hashing import FileHash

MANIFEST_NAME = "MANIFEST"
FORMAT_VERSION = 1
_LINE = re.compile(r"^([0-9a-f]{64}) ([0-9]+) (.+)$")


def render_manifest(entries: Iterable[FileHash], *, header: Iterable[str] = ()) -> bytes:
    """The MANIFEST bytes for `entries` (sorted by path here, whatever order they come in)."""
    lines = [f"# hfrelease MANIFEST {FORMAT_VERSION}"]
    lines += [f"# {line}" for line in header]
    lines.append("# check: grep -v '^#' MANIFEST | sed -E 's/^([0-9a-f]{64}) [0-9]+ /\\1  /' | sha256sum -c")
    for entry in sorted(entries, key=lambda e: e.path):
        if entry.path == MANIFEST_NAME or "\n" in entry.path:
            raise ValueError(f"{entry.path!r} cannot be listed in a MANIFEST")
        lines.append(f"{entry.sha256} {entry.size} {entry.path}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def parse_manifest(data: bytes) -> dict[str, FileHash]:
    """Entries of a MANIFEST, by path; a malformed line is a ValueError naming it."""
    entries: dict[str, FileHash] = {}
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"MANIFEST line {number} is not '<sha256> <size> <path>': {line[:120]!r}")
        sha, size, path = match.groups()
        entries[path] = FileHash(path=path, size=int(size), sha256=sha)
    return entries
