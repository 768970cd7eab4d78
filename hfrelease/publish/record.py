"""The bundle as published, kept on this machine: what `hfrelease verify` compares the Hub's copy with.

After a release lands, each repo's MANIFEST (sha256 and size of every file it published) is written to
`<family>/.hfrelease/bundle/<tag>/<artifact-id>/MANIFEST`, the layout `hfrelease bundle --out DIR` writes
(there with the files beside it). The Hub's own MANIFEST cannot vouch for a release: whoever can push to
the repo can replace a file and its MANIFEST line and move the tag. A copy kept off the Hub can.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hfrelease.bundle import MANIFEST_NAME, RepoBundle, parse_manifest
from hfrelease.files.atomic import write_atomic
from hfrelease.files.hashing import FileHash


@dataclass(frozen=True, kw_only=True)
class LocalBundle:
    """One repo's bundle as found on this machine: its MANIFEST's entries and the MANIFEST's own sha256."""

    path: Path  # the MANIFEST file read
    entries: dict[str, FileHash]
    manifest_sha256: str


def published_dir(family_root: Path, tag: str) -> Path:
    """Where `publish` keeps the bundles of release `tag` (one directory per artifact id)."""
    return family_root / ".hfrelease" / "bundle" / tag


def record_published(repos: Iterable[RepoBundle], directory: Path) -> None:
    """Write each repo's MANIFEST under `directory/<artifact-id>/`, atomically."""
    for repo in repos:
        write_atomic(directory / repo.artifact_id / MANIFEST_NAME, repo.manifest.read())


def read_local_bundle(directory: Path, artifact_id: str) -> LocalBundle | None:
    """`directory/<artifact-id>/MANIFEST` parsed, or None when there is none (a malformed one is a ValueError)."""
    path = directory / artifact_id / MANIFEST_NAME
    if not path.is_file():
        return None
    data = path.read_bytes()
    return LocalBundle(path=path, entries=parse_manifest(data), manifest_sha256=hashlib.sha256(data).hexdigest())
