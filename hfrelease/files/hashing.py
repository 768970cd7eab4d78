"""Artifact content hashes: sha256 of the weight files, each weight byte read at most once.

An artifact's hash is the sha256 of its weight files (`*.safetensors`, found recursively), listed in the
format `sha256sum` prints (`"<sha256>  <relpath>\\n"`, two spaces, relative POSIX paths) and sorted by
relative path (code-point order, which is byte order for UTF-8, i.e. `LC_ALL=C sort`). Anyone can check
a hash printed in a card without hfrelease:

    cd ARTIFACT_DIR
    find -L . -type f -name '*.safetensors' -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum

Hashing a 100 GB artifact reads 100 GB, so a `HashCache` remembers each file's digest under its
(size, mtime_ns, ctime_ns, inode, device): a file whose stat is unchanged is never read again, a file that
changed in any of them is. `ContentHash.bytes_read` says how many bytes a call actually read, so a test
or benchmark can check "weight bytes read per run <= 1x their size, 0x when unchanged".

Symbolic links are followed only while they stay inside the artifact directory (or `link_root`, e.g. a
Hugging Face cache repo folder, whose snapshots link to `../../blobs/`): a weight file reached through a
link that leaves it is an `ArtifactError`, because the hash would then describe files the artifact does
not contain.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hfrelease.errors import ArtifactError
from hfrelease.files.atomic import write_atomic

WEIGHT_SUFFIX = ".safetensors"
CHUNK_BYTES = 8 * 1024 * 1024
_CACHE_FORMAT = 1

# (size, mtime_ns, ctime_ns, inode, device): ctime catches a rewrite that restored the old mtime
# (cp -p, rsync -t); inode and device catch a file replaced by another of the same size and times.
_Signature = tuple[int, int, int, int, int]


@dataclass(frozen=True, kw_only=True)
class FileHash:
    """One file's digest; `path` is relative to the artifact directory (or, in a MANIFEST, to the repo), with
    "/" separators."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ContentHash:
    """An artifact's combined digest, the per-file digests it covers, and the bytes this call read."""

    sha256: str
    files: tuple[FileHash, ...]
    bytes_read: int


class HashCache:
    """Per-file digests persisted in one JSON file, keyed by absolute path and stat signature.

    Losing the file costs a re-read, never a wrong hash, so an unreadable or foreign cache file is
    treated as empty. Two processes sharing one cache: the last save wins and the other's new
    entries are read again next time; still never wrong.

    Thread-safe: publish hashes the files of several repos at once (hashlib releases the GIL, so two
    threads use two cores), all through one cache.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_read = 0  # over this object's lifetime: what a benchmark of several runs sums
        # Re-entrant: `record` stores and saves under one hold, so no save sees half of a file's update.
        self._lock = threading.RLock()
        self._entries: dict[str, dict[str, int | str]] = self._load(path)

    @staticmethod
    def _load(path: Path) -> dict[str, dict[str, int | str]]:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT or not isinstance(data.get("files"), dict):
            return {}
        return {k: v for k, v in data["files"].items() if isinstance(v, dict)}

    def lookup(self, key: str, signature: _Signature) -> str | None:
        """The cached sha256 of `key` if its stat signature is unchanged, else None."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or _entry_signature(entry) != signature:
            return None
        sha = entry.get("sha256")
        return sha if isinstance(sha, str) else None

    def store(self, key: str, signature: _Signature, sha256: str) -> None:
        size, mtime_ns, ctime_ns, inode, device = signature
        entry: dict[str, int | str] = {
            "size": size,
            "mtime_ns": mtime_ns,
            "ctime_ns": ctime_ns,
            "inode": inode,
            "device": device,
            "sha256": sha256,
        }
        with self._lock:
            self._entries[key] = entry

    def record(self, key: str, signature: _Signature, sha256: str, *, bytes_read: int) -> None:
        """Store a digest just computed, count the bytes read for it, and save: one atomic step."""
        with self._lock:
            self.store(key, signature, sha256)
            self.bytes_read += bytes_read
            # Saved after every file read, so an interrupted run over a large artifact keeps what it hashed.
            self.save()

    def save(self) -> None:
        """Write the cache atomically (a crash leaves the previous cache, never a torn one)."""
        with self._lock:
            data = {"format": _CACHE_FORMAT, "files": self._entries}
            write_atomic(self.path, json.dumps(data, sort_keys=True, separators=(",", ":")).encode())


def _entry_signature(entry: dict[str, int | str]) -> tuple[object, ...]:
    return tuple(entry.get(name) for name in ("size", "mtime_ns", "ctime_ns", "inode", "device"))


def _signature(stat: os.stat_result) -> _Signature:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)


def hash_artifact(directory: Path, *, cache: HashCache | None = None, link_root: Path | None = None) -> ContentHash:
    """The content hash of the weight files under `directory` (see the module docstring for the format)."""
    relpaths = weight_files(directory, link_root=link_root)
    for rel in relpaths:
        # sha256sum escapes these characters in its output, which would make the lines ambiguous.
        if "\n" in rel or "\\" in rel:
            raise ArtifactError(
                f"{directory / rel}: a weight file name contains a newline or backslash",
                hint="Rename the file; its name cannot be listed unambiguously in a sha256sum line.",
            )
    files, bytes_read = _hash_files(directory, relpaths, cache, link_root=link_root)
    lines = "".join(f"{f.sha256}  {f.path}\n" for f in files)
    return ContentHash(sha256=hashlib.sha256(lines.encode("utf-8")).hexdigest(), files=files, bytes_read=bytes_read)


def hash_files(
    directory: Path, relpaths: Iterable[str], cache: HashCache | None = None, *, link_root: Path | None = None
) -> tuple[FileHash, ...]:
    """Digests of any files under `directory`, in the order given (the publish MANIFEST reuses them)."""
    return _hash_files(directory, list(relpaths), cache, link_root=link_root)[0]


def weight_files(directory: Path, *, link_root: Path | None = None) -> list[str]:
    """Relative POSIX paths of every `*.safetensors` under `directory`, sorted, links followed like `find -L`."""
    root = _resolved_directory(directory)
    bound = _resolved_directory(link_root) if link_root is not None else root
    found: list[str] = []
    # Depth-first over real directories; `ancestors` holds the (device, inode) of the directories on the
    # current path so a link back to one of them is skipped instead of recursed into forever (as find -L).
    stack: list[tuple[Path, str, frozenset[tuple[int, int]]]] = []
    top = root.stat()
    stack.append((root, "", frozenset({(top.st_dev, top.st_ino)})))
    while stack:
        real_dir, prefix, ancestors = stack.pop()
        for entry in sorted(os.scandir(real_dir), key=lambda e: e.name):
            rel = f"{prefix}{entry.name}"
            is_weight = entry.name.endswith(WEIGHT_SUFFIX)
            target = Path(entry.path)
            if entry.is_symlink():
                target = Path(entry.path).resolve()
                if not target.exists():
                    if is_weight:
                        raise ArtifactError(f"{directory / rel}: broken symbolic link", hint=_LINK_HINT)
                    continue
                if not target.is_relative_to(bound) and (is_weight or target.is_dir()):
                    raise ArtifactError(
                        f"{directory / rel} links to {target}, outside {bound}",
                        hint=_LINK_HINT,
                    )
            if target.is_dir():
                stat = target.stat()
                if (stat.st_dev, stat.st_ino) not in ancestors:
                    stack.append((target, f"{rel}/", ancestors | {(stat.st_dev, stat.st_ino)}))
            elif is_weight and target.is_file():
                found.append(rel)
    if not found:
        raise ArtifactError(
            f"{directory}: no {WEIGHT_SUFFIX} files",
            hint="Check the artifact's source path in the manifest; an artifact's hash covers its weight files.",
        )
    return sorted(found)


_LINK_HINT = "Copy the file into the artifact directory, or pass the directory its links point into as link_root."


def _resolved_directory(directory: Path) -> Path:
    try:
        resolved = directory.resolve(strict=True)
    except OSError as exc:
        raise ArtifactError(f"{directory}: cannot open the artifact directory ({exc.strerror})") from exc
    if not resolved.is_dir():
        raise ArtifactError(f"{directory}: not a directory")
    return resolved


def _hash_files(
    directory: Path, relpaths: list[str], cache: HashCache | None, *, link_root: Path | None
) -> tuple[tuple[FileHash, ...], int]:
    root = _resolved_directory(directory)
    bound = _resolved_directory(link_root) if link_root is not None else root
    # Two relative paths can reach one real file (a link, or a linked directory): read it once per call
    # even without a persistent cache.
    seen: dict[str, tuple[int, str]] = {}
    results: list[FileHash] = []
    bytes_read = 0
    for rel in relpaths:
        real = _inside(directory, root, bound, rel)
        key = str(real)
        if key not in seen:
            size, sha, read = _hash_one(real, key, cache)
            seen[key] = (size, sha)
            bytes_read += read
        size, sha = seen[key]
        results.append(FileHash(path=rel, size=size, sha256=sha))
    return tuple(results), bytes_read


def _inside(directory: Path, root: Path, bound: Path, rel: str) -> Path:
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts or "\\" in rel:
        raise ArtifactError(f"{rel!r} is not a relative path inside {directory}")
    try:
        real = (root / pure).resolve(strict=True)
    except OSError as exc:
        raise ArtifactError(f"{directory / rel}: cannot open ({exc.strerror})") from exc
    if not real.is_relative_to(bound):
        raise ArtifactError(f"{directory / rel} links to {real}, outside {bound}", hint=_LINK_HINT)
    if not real.is_file():
        raise ArtifactError(f"{directory / rel}: not a regular file")
    return real


def _hash_one(real: Path, key: str, cache: HashCache | None) -> tuple[int, str, int]:
    """(size, sha256, bytes read) of one file; reads nothing when the cache knows its signature."""
    with real.open("rb", buffering=0) as handle:
        before = _signature(os.fstat(handle.fileno()))
        if cache is not None and (sha := cache.lookup(key, before)) is not None:
            return before[0], sha, 0
        # Our own loop rather than hashlib.file_digest: file_digest reads in fixed 256 KiB chunks and does
        # not say how many bytes it read, and the byte count is what proves "read at most once".
        digest = hashlib.sha256()
        buffer = bytearray(CHUNK_BYTES)
        view = memoryview(buffer)
        read = 0
        while count := handle.readinto(buffer):
            digest.update(view[:count])
            read += count
        after = _signature(os.fstat(handle.fileno()))
    if after != before or read != before[0]:
        raise ArtifactError(
            f"{real} changed while it was being hashed",
            hint="Wait until whatever writes the artifact (a download, a quantization) has finished, then rerun.",
        )
    sha = digest.hexdigest()
    if cache is not None:
        cache.record(key, before, sha, bytes_read=read)
    return before[0], sha, read
