"""Check what the Hub serves against the bundle: file by file, sha256 and size.

Two depths: `verify_revision` (metadata of every file, plus MANIFEST and the card downloaded back and
hashed; never a weight byte) runs on every staged and published commit; `verify_release` downloads a whole tag with
`snapshot_download` and hashes every byte against the MANIFEST it carries, the check a consumer can run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_url, hf_raise_for_status, snapshot_download

# Documented public helpers (huggingface_hub's "Utilities" reference), exported lazily, which mypy cannot see.
from huggingface_hub.utils import build_hf_headers, http_backoff  # type: ignore[attr-defined]

from hfrelease.bundle import MANIFEST_NAME, RepoBundle, parse_manifest
from hfrelease.errors import PublishError
from hfrelease.publish.remote import KEPT, compare, read_revision

_READ_BACK = (MANIFEST_NAME, "README.md")


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def verify_revision(api: HfApi, bundle: RepoBundle, commit: str, *, read_back: bool = True) -> None:
    """The commit holds exactly the bundle; with `read_back`, MANIFEST and README.md download byte-identical."""
    remote = read_revision(api, bundle.repo, commit)
    if remote is None:
        raise PublishError(f"{bundle.repo}: commit {commit} cannot be read back")
    changes = compare(bundle, remote)
    if not changes.empty:
        wrong = [f.path for f in (*changes.added, *changes.changed)] + [f"extra {p}" for p in changes.deleted]
        raise PublishError(
            f"{bundle.repo}@{commit[:12]} does not hold the bundle: {', '.join(wrong[:10])}",
            hint="Nothing was tagged. Run `hfrelease publish` again to re-stage.",
        )
    if not read_back:
        return
    for name in _READ_BACK:
        expected = bundle.file(name)
        if expected is None:
            continue
        if hashlib.sha256(_download(api, bundle.repo, name, commit)).hexdigest() != expected.sha256:
            raise PublishError(
                f"{bundle.repo}@{commit[:12]}: {name} downloads with a different sha256 than was uploaded",
                hint="Nothing was tagged. Run `hfrelease publish` again to re-stage.",
            )


def _download(api: HfApi, repo: str, name: str, commit: str) -> bytes:
    """A small file's bytes at `commit`, as /resolve serves them: one GET.

    Not `hf_hub_download`, which adds a HEAD per file and a cache directory with lock files: for two
    small files read once, that doubled the requests of this check (`verify_release` and the `hf` CLI
    test cover the download path a consumer takes).
    """
    url = hf_hub_url(repo, name, revision=commit, endpoint=api.endpoint)
    response = http_backoff("GET", url, headers=build_hf_headers(token=api.token, library_name="hfrelease"))
    hf_raise_for_status(response)
    return response.content


def verify_release(
    repo: str,
    *,
    tag: str,
    directory: Path,
    endpoint: str | None = None,
    token: str | None = None,
    api: HfApi | None = None,
) -> Path:
    """Download `tag` of `repo` into `directory` and check every file against its MANIFEST; return `directory`.

    Also checks the tag resolves to a commit and that the download holds no file MANIFEST does not list.
    """
    client = api or HfApi(endpoint=endpoint, token=token)
    tags = {t.name: t.target_commit for t in client.list_repo_refs(repo).tags}
    if tag not in tags:
        raise PublishError(f"{repo}: no tag {tag}", hint="Publish the release first (`hfrelease publish`).")
    snapshot_download(repo, revision=tags[tag], local_dir=directory, endpoint=client.endpoint, token=client.token)
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file():
        raise PublishError(f"{repo}@{tag}: no {MANIFEST_NAME} in the release")
    entries = parse_manifest(manifest_path.read_bytes())
    problems = []
    for entry in entries.values():
        path = directory / entry.path
        if not path.is_file():
            problems.append(f"{entry.path} missing")
        elif path.stat().st_size != entry.size or _sha256_file(path) != entry.sha256:
            problems.append(f"{entry.path} differs from MANIFEST")
    listed = {*entries, MANIFEST_NAME, *KEPT}
    for path in directory.rglob("*"):
        relative = path.relative_to(directory).as_posix()
        # snapshot_download(local_dir=...) keeps its own metadata under .cache/huggingface/.
        if path.is_file() and not relative.startswith(".cache/") and relative not in listed:
            problems.append(f"{relative} is not in MANIFEST")
    if problems:
        raise PublishError(f"{repo}@{tag} does not match its MANIFEST: {'; '.join(problems[:10])}")
    return directory
