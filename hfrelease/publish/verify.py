"""Check what the Hub serves against the bundle: file by file, sha256 and size.

Two depths: `verify_revision` (metadata of every file, plus MANIFEST and the card downloaded back and
hashed; never a weight byte) runs on every staged and published commit; `check_release` downloads a whole
tag with `snapshot_download` and hashes every byte against the MANIFEST it carries, the Hub's own LFS oids
and, when this machine published it, the bundle as it was published (`hfrelease verify`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_url, hf_raise_for_status, snapshot_download

# Documented public helpers (huggingface_hub's "Utilities" reference), exported lazily, which mypy cannot see
# (`utils` made lazy: https://github.com/huggingface/huggingface_hub/pull/4914; the lazy facades' typing:
# https://github.com/huggingface/huggingface_hub/issues/1662).
from huggingface_hub.utils import build_hf_headers, http_backoff  # type: ignore[attr-defined]

from hfrelease.bundle import ATTESTATION_NAME, MANIFEST_NAME, RepoBundle, parse_manifest
from hfrelease.errors import PublishError
from hfrelease.hashing import FileHash
from hfrelease.publish.remote import KEPT, RemoteFile, compare, holds_release, read_revision

_READ_BACK = (MANIFEST_NAME, "README.md")


def verify_revision(
    api: HfApi, bundle: RepoBundle, commit: str, *, read_back: bool = True, any_attestation: bool = False
) -> None:
    """The commit holds exactly the bundle; with `read_back`, MANIFEST and README.md download byte-identical.

    `any_attestation`: the commit is another run's release of this bundle, whose attestation may be its own.
    """
    remote = read_revision(api, bundle.repo, commit)
    if remote is None:
        raise PublishError(f"{bundle.repo}: commit {commit} cannot be read back")
    changes = compare(bundle, remote)
    if not (holds_release(bundle, remote) if any_attestation else changes.empty):
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


@dataclass(frozen=True, kw_only=True)
class ReleaseCheck:
    """One repo's release tag, downloaded and checked: what it was compared with, and every problem found."""

    repo: str
    tag: str
    commit: str | None  # where the tag points (None: no such tag)
    directory: Path
    files: int  # files downloaded (the Hub's .gitattributes included)
    compared_with: tuple[str, ...]  # "MANIFEST", "Hub LFS oids", "local bundle"
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, kw_only=True)
class _Digest:
    size: int
    sha256: str
    blob_id: str | None  # git's id of the bytes, computed only for a file the Hub keeps as a regular git blob


def _digest(path: Path, *, git_blob: bool) -> _Digest:
    """sha256 (and, with `git_blob`, the git blob id) in one read: a weight file is read once.

    The blob id is what the Hub's tree lists for a regular (non-LFS) file; an LFS file is known by its
    sha256, so a multi-GB weight is not also run through sha1.
    """
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False) if git_blob else None
    with path.open("rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            sha256.update(chunk)
            if blob is not None:
                blob.update(chunk)
    return _Digest(size=size, sha256=sha256.hexdigest(), blob_id=blob.hexdigest() if blob is not None else None)


def check_release(
    repo: str,
    *,
    tag: str,
    directory: Path,
    api: HfApi,
    local: Mapping[str, FileHash] | None = None,
    local_manifest_sha256: str | None = None,
    attested_by: str | None = None,
) -> ReleaseCheck:
    """Download `tag` of `repo` into `directory` and check every file three ways; never raises on a mismatch.

    1. the MANIFEST the release carries (sha256 and size of every other file, no file left out or added);
    2. the Hub's own record of each file at the tagged commit: the LFS oid (the sha256 the Hub stored the
       object under) for LFS files, the git blob id for regular ones;
    3. `local`, the MANIFEST entries of the bundle as it was published from this machine (and
       `local_manifest_sha256`, that MANIFEST's own hash), when there is one.

    The first two only show that the Hub is consistent with itself: whoever can push to the repo can
    replace a file and its MANIFEST line and move the tag, and both still agree. Only the third, kept
    off the Hub, catches that. Problems are returned, one per file, for the caller to report with other repos'.

    A release that carries `MANIFEST.sigstore.json` (the publish job's attestation) must attest this very
    MANIFEST (`attestation.py`; with `attested_by`, its signature is checked too): a repo whose MANIFEST and
    files were replaced together no longer matches it, even where no local bundle was kept.
    """
    tags = {t.name: t.target_commit for t in api.list_repo_refs(repo).tags}
    commit = tags.get(tag)
    compared = ("MANIFEST", "Hub LFS oids", *(("local bundle",) if local is not None else ()))
    if commit is None:
        return ReleaseCheck(repo=repo, tag=tag, commit=None, directory=directory, files=0, compared_with=compared,
                            problems=(f"no tag {tag} (publish the release first: `hfrelease publish`)",))
    remote = read_revision(api, repo, commit)
    listed = remote.files if remote is not None else {}
    snapshot_download(repo, revision=commit, local_dir=directory, endpoint=api.endpoint, token=api.token)
    # snapshot_download(local_dir=...) keeps its own metadata under .cache/huggingface/.
    downloaded = {p.relative_to(directory).as_posix(): p for p in sorted(directory.rglob("*"))
                  if p.is_file() and not p.relative_to(directory).as_posix().startswith(".cache/")}
    problems: list[str] = []
    carried: dict[str, FileHash] = {}
    if MANIFEST_NAME not in downloaded:
        problems.append(f"{MANIFEST_NAME}: not in the release")
    else:
        try:
            carried = parse_manifest(downloaded[MANIFEST_NAME].read_bytes())
        except (ValueError, UnicodeDecodeError) as error:
            problems.append(f"{MANIFEST_NAME}: unreadable ({error})")
    for path, file in downloaded.items():
        hub = listed.get(path)
        digest = _digest(file, git_blob=hub is not None and hub.sha256 is None)
        problems += _file_problems(path, digest, hub=hub, carried=carried.get(path),
                                   local=None if local is None else local.get(path), has_local=local is not None,
                                   has_manifest=bool(carried))  # fmt: skip
        if path == MANIFEST_NAME and local_manifest_sha256 is not None and digest.sha256 != local_manifest_sha256:
            problems.append(f"{MANIFEST_NAME}: differs from the local bundle's MANIFEST (the release was changed "
                            "on the Hub after it was published from here)")
    if ATTESTATION_NAME in downloaded and MANIFEST_NAME in downloaded:
        from hfrelease.publish.attestation import attestation_problems

        compared = (*compared, "attestation")
        problems += attestation_problems(downloaded[ATTESTATION_NAME].read_bytes(),
                                         downloaded[MANIFEST_NAME].read_bytes(), attested_by=attested_by)
    elif attested_by is not None:
        problems.append(f"{ATTESTATION_NAME}: not in the release (asked to check its attestation)")
    missing = sorted({*carried, *(local or {}), *listed} - set(downloaded))
    problems += [f"{path}: missing from the download" for path in missing]
    return ReleaseCheck(repo=repo, tag=tag, commit=commit, directory=directory, files=len(downloaded),
                        compared_with=compared, problems=tuple(problems))


def _file_problems(
    path: str, digest: _Digest, *, hub: RemoteFile | None, carried: FileHash | None,
    local: FileHash | None, has_local: bool, has_manifest: bool,
) -> list[str]:  # fmt: skip
    found = []
    if hub is None:
        found.append(f"{path}: downloaded, but not in the Hub's tree at the tagged commit")
    elif hub.sha256 is not None and (hub.sha256 != digest.sha256 or hub.size != digest.size):
        found.append(f"{path}: downloads as sha256 {digest.sha256[:12]}, the Hub's LFS oid is {hub.sha256[:12]}")
    elif hub.sha256 is None and hub.blob_id != digest.blob_id:
        found.append(f"{path}: downloads as git blob {(digest.blob_id or '')[:12]}, the Hub's tree lists "
                     f"{hub.blob_id[:12]}")
    if path in (MANIFEST_NAME, ATTESTATION_NAME) or path in KEPT:
        return found  # MANIFEST lists neither itself nor the attestation that signs it
    if has_manifest:
        if carried is None:
            found.append(f"{path}: not in MANIFEST")
        elif (carried.sha256, carried.size) != (digest.sha256, digest.size):
            found.append(f"{path}: differs from MANIFEST")
    if has_local:
        if local is None:
            found.append(f"{path}: not in the local bundle")
        elif (local.sha256, local.size) != (digest.sha256, digest.size):
            found.append(f"{path}: sha256 {digest.sha256[:12]} differs from the local bundle's {local.sha256[:12]}")
    return found


def verify_release(
    repo: str,
    *,
    tag: str,
    directory: Path,
    endpoint: str | None = None,
    token: str | None = None,
    api: HfApi | None = None,
) -> Path:
    """Download `tag` of `repo` into `directory` and check it (`check_release`, no local bundle); return `directory`."""
    client = api or HfApi(endpoint=endpoint, token=token)
    checked = check_release(repo, tag=tag, directory=directory, api=client)
    if not checked.ok:
        raise PublishError(f"{repo}@{tag} does not match its MANIFEST: {'; '.join(checked.problems[:10])}")
    return directory
