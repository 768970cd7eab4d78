"""Artifact content hashes: the sha256sum-format digest, the stat-keyed cache, and the symlink rule."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hfrelease.errors import ArtifactError
from hfrelease.files.hashing import HashCache, hash_artifact, hash_files

pytestmark = pytest.mark.unit

FILES = {
    "model-00001-of-00002.safetensors": b"first shard " * 1000,
    "model-00002-of-00002.safetensors": b"second shard " * 700,
    "nested/head.safetensors": b"draft head",
    "config.json": b"{}",
}


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    root = tmp_path / "artifact"
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _weight_bytes() -> int:
    return sum(len(data) for rel, data in FILES.items() if rel.endswith(".safetensors"))


def test_digest_is_sha256sum_of_sorted_weight_files(artifact: Path) -> None:
    """The combined digest equals sha256 of `sha256sum`'s lines for the sorted weight files, computed independently."""
    weights = sorted(rel for rel in FILES if rel.endswith(".safetensors"))
    lines = "".join(f"{hashlib.sha256(FILES[rel]).hexdigest()}  {rel}\n" for rel in weights)

    result = hash_artifact(artifact)

    assert result.sha256 == hashlib.sha256(lines.encode()).hexdigest()
    assert [f.path for f in result.files] == weights
    assert [f.size for f in result.files] == [len(FILES[rel]) for rel in weights]
    assert result.bytes_read == _weight_bytes()


def test_warm_call_reads_nothing(artifact: Path, tmp_path: Path) -> None:
    """With a cache, a second hash of an unchanged artifact reads 0 bytes and gives the same digest."""
    cache = HashCache(tmp_path / "cache.json")
    cold = hash_artifact(artifact, cache=cache)
    warm = hash_artifact(artifact, cache=cache)

    assert cold.bytes_read == _weight_bytes()
    assert warm.bytes_read == 0
    assert (warm.sha256, warm.files) == (cold.sha256, cold.files)
    assert cache.bytes_read == _weight_bytes()


def test_cache_survives_reload(artifact: Path, tmp_path: Path) -> None:
    """A new HashCache loaded from the same file (a later run) reads 0 bytes."""
    cold = hash_artifact(artifact, cache=HashCache(tmp_path / "cache.json"))
    again = hash_artifact(artifact, cache=HashCache(tmp_path / "cache.json"))
    assert again.bytes_read == 0
    assert again.sha256 == cold.sha256


def test_changed_file_is_reread_alone(artifact: Path, tmp_path: Path) -> None:
    """Rewriting one shard (same size) re-reads only that shard, and the digest changes."""
    cache = HashCache(tmp_path / "cache.json")
    before = hash_artifact(artifact, cache=cache)
    shard = artifact / "nested/head.safetensors"
    shard.write_bytes(b"DRAFT HEAD")  # same length: only the stat's times and the content differ

    after = hash_artifact(artifact, cache=HashCache(tmp_path / "cache.json"))

    assert after.bytes_read == len(b"DRAFT HEAD")
    assert after.sha256 != before.sha256
    by_path = {f.path: f.sha256 for f in after.files}
    assert by_path["nested/head.safetensors"] == hashlib.sha256(b"DRAFT HEAD").hexdigest()


def test_touched_file_is_reread(artifact: Path, tmp_path: Path) -> None:
    """Touching a file (new mtime, same content) re-reads just that file; the digest is unchanged."""
    cache = HashCache(tmp_path / "cache.json")
    before = hash_artifact(artifact, cache=cache)
    shard = artifact / "model-00002-of-00002.safetensors"
    stat = shard.stat()
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    after = hash_artifact(artifact, cache=cache)

    assert after.bytes_read == len(FILES["model-00002-of-00002.safetensors"])
    assert after.sha256 == before.sha256


def test_link_inside_is_followed_and_read_once(artifact: Path) -> None:
    """A link to a file inside the artifact is hashed under its own name, and the bytes are read only once."""
    (artifact / "alias.safetensors").symlink_to("nested/head.safetensors")
    result = hash_artifact(artifact)
    by_path = {f.path: f.sha256 for f in result.files}
    assert by_path["alias.safetensors"] == by_path["nested/head.safetensors"]
    assert result.bytes_read == _weight_bytes()


@pytest.mark.parametrize("target", ["file", "directory"])
def test_link_leaving_the_artifact_is_refused(artifact: Path, tmp_path: Path, target: str) -> None:
    """A weight file or directory link pointing outside the artifact directory is an ArtifactError."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "stolen.safetensors").write_bytes(b"not ours")
    if target == "file":
        (artifact / "stolen.safetensors").symlink_to(outside / "stolen.safetensors")
    else:
        (artifact / "more").symlink_to(outside)
    with pytest.raises(ArtifactError, match="outside"):
        hash_artifact(artifact)


def test_link_root_allows_a_cache_layout(tmp_path: Path) -> None:
    """With link_root, links into a sibling blobs/ folder (the Hugging Face cache layout) are followed."""
    repo = tmp_path / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_bytes(b"weights")
    snapshot = repo / "snapshots" / "rev"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to("../../blobs/abc")

    with pytest.raises(ArtifactError):
        hash_artifact(snapshot)
    result = hash_artifact(snapshot, link_root=repo)
    assert result.files[0].sha256 == hashlib.sha256(b"weights").hexdigest()


def test_hash_files_keeps_order_and_refuses_escapes(artifact: Path) -> None:
    """hash_files hashes any listed file in the given order and refuses a path leaving the directory."""
    files = hash_files(artifact, ["config.json", "nested/head.safetensors"])
    assert [(f.path, f.sha256) for f in files] == [
        ("config.json", hashlib.sha256(b"{}").hexdigest()),
        ("nested/head.safetensors", hashlib.sha256(b"draft head").hexdigest()),
    ]
    with pytest.raises(ArtifactError):
        hash_files(artifact, ["../artifact/config.json"])


def test_no_weight_files_is_an_error(tmp_path: Path) -> None:
    """A directory without *.safetensors is refused rather than given the hash of nothing."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match=r"no \.safetensors files"):
        hash_artifact(tmp_path / "empty")


def test_damaged_cache_file_is_ignored(artifact: Path, tmp_path: Path) -> None:
    """A corrupt cache file costs a re-read, not a crash, and is rewritten valid."""
    cache_path = tmp_path / "cache.json"
    cache_path.write_text("{not json")
    assert hash_artifact(artifact, cache=HashCache(cache_path)).bytes_read == _weight_bytes()
    assert hash_artifact(artifact, cache=HashCache(cache_path)).bytes_read == 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
