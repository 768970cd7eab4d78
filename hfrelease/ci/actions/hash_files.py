"""`hashFiles(...)` as the Actions runner computes it (actions/runner, src/Misc/expressionFunc/hashFiles,
over `@actions/glob`): the patterns (one per argument, or several in one separated by newlines; a leading
`!` excludes) are matched under the workspace; directories and anything outside the workspace are left out;
each file's content is hashed with SHA-256 and the result is the SHA-256 of those digests, in hex. No file
matched: the empty string.

Files are taken in sorted path order, so one tree always gives one hash (the runner takes them in the
order its globber walks the tree, which for a checkout is that order too).
"""

from __future__ import annotations

import glob
import hashlib
from collections.abc import Sequence
from pathlib import Path


def _matches(workspace: Path, pattern: str) -> set[Path]:
    if not pattern:
        return set()
    if Path(pattern).is_absolute():
        raise ValueError(f"{pattern!r}: patterns are relative to the workspace")
    found = glob.glob(pattern,  # noqa: PTH207 - Path.glob has no include_hidden/recursive `**` of @actions/glob
                       root_dir=workspace, recursive=True, include_hidden=True)
    matched: set[Path] = set()
    for relative in found:
        path = workspace / relative
        matched.add(path)
        if path.is_dir() and not path.is_symlink():  # a directory pattern matches what is under it, as @actions/glob
            matched.update(p for p in path.rglob("*"))
    return matched


def hash_files(workspace: str, patterns: Sequence[str]) -> str:
    """The runner's `hashFiles(patterns...)` under `workspace`."""
    root = Path(workspace).resolve()
    included: set[Path] = set()
    excluded: set[Path] = set()
    for line in (line.strip() for argument in patterns for line in argument.splitlines()):
        if line.startswith("!"):
            excluded |= _matches(root, line[1:].strip())
        else:
            included |= _matches(root, line)
    result = hashlib.sha256()
    count = 0
    for path in sorted(included - excluded):
        resolved = path.resolve()
        if not resolved.is_relative_to(root) or resolved == root or not resolved.is_file():
            continue
        with resolved.open("rb") as handle:  # streamed: a workspace may hold multi-GB weights
            result.update(hashlib.file_digest(handle, "sha256").digest())
        count += 1
    return result.hexdigest() if count else ""
