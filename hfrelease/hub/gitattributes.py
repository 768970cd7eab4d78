"""Which files go through LFS, and which are ignored: the Hub's `.gitattributes` / `.gitignore` rules.

The preupload answer decides how huggingface_hub sends a file (inline base64 in the commit, or LFS batch +
PUT), so these rules decide whether LFS is exercised at all. The Hub sends a file through LFS when
`.gitattributes` marks it `filter=lfs`, when it is 10 MiB or more, or when its first bytes look binary.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Literal

UploadMode = Literal["lfs", "regular"]

# Files this large cannot be committed inline; the Hub refuses them outside LFS.
LFS_THRESHOLD = 10 * 1024 * 1024

# The `.gitattributes` the Hub writes into every new repository's first commit.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
        "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
        "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
        "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
    )
)  # fmt: skip


def _matches(path: str, pattern: str) -> bool:
    """Git's rule, simplified: a pattern without `/` matches the file name at any depth, else the path."""
    pattern = pattern.removeprefix("/")
    if pattern.endswith("/"):  # a directory pattern ignores everything below it
        directory = pattern.rstrip("/")
        parts = path.split("/")[:-1]
        return any(fnmatch.fnmatchcase(part, directory) for part in parts)
    if "/" not in pattern:
        return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    return fnmatch.fnmatchcase(path, pattern.replace("**/", "*"))


def lfs_patterns(gitattributes: str) -> list[str]:
    """Patterns `.gitattributes` routes through LFS (`filter=lfs`)."""
    patterns = []
    for line in gitattributes.splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#") and "filter=lfs" in fields[1:]:
            patterns.append(fields[0])
    return patterns


def ignore_patterns(gitignore: str) -> list[str]:
    """Patterns of a `.gitignore` (negations are not supported and are skipped)."""
    lines = (line.strip() for line in gitignore.splitlines())
    return [line for line in lines if line and not line.startswith(("#", "!"))]


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    return any(_matches(path, pattern) for pattern in patterns)


def upload_mode(path: str, size: int, sample: bytes, lfs: Sequence[str]) -> UploadMode:
    """The Hub's choice for one file of a preupload request."""
    if size >= LFS_THRESHOLD or matches_any(path, lfs) or b"\0" in sample:
        return "lfs"
    return "regular"
