"""An artifact's files and content identity, from a local `path` or a Hub repo pinned to a commit.

Two ways to the same identity (`hfrelease.files.hashing`: sha256 over the sha256sum lines of the
`*.safetensors` files):

- **From downloaded files.** A Hub source is downloaded once into the Hugging Face cache
  (`snapshot_download` at the pinned revision) and hashed in place. The cache's `snapshots/<rev>/<file>`
  entries are links to `../../blobs/<hash>`, so the hash follows links within the cache's repo folder
  (`models--owner--name`), and nowhere else.
- **From the Hub, without downloading weights.** At a pinned commit the Hub states each LFS file's sha256
  (`list_repo_tree` / `get_paths_info`: `lfs.sha256`): exactly the digest hashing the downloaded file
  gives, so a weight file's line is made from it without reading a byte of it. A weight file stored in
  git itself (not LFS: the Hub gives only its git blob sha1) is downloaded -- such files are small -- and
  hashed. Jobs that only judge or render (a merge job on a GitHub-hosted runner) use this path and never
  download gigabytes; the identity is the one an eval runner computed from its download, so the records it
  wrote are found. When no Hub answers (offline, unreachable) and the Hugging Face cache already holds the
  pinned commit's snapshot, that snapshot is hashed instead: the same identity, with nothing fetched.

A gated or private source is read with `HF_READ_TOKEN` when it is set (`source_token`): the release
workflow's eval jobs get a read-only, repo-scoped token under that name, never the publish token. Only the
source reads here (and the preflight's) pass it; vLLM, lm-eval and custom gates start without it, as
without any credential (`hfrelease.redact.public_environment`). Unset, huggingface_hub's own token is used.

The Hub is reached through huggingface_hub's own endpoint (`HF_ENDPOINT`). With `HF_HUB_OFFLINE=1` (the
demo and CI) nothing may reach huggingface.co, but the built-in Hub on this machine is part of hfrelease:
offline mode is lifted for a loopback endpoint only, as `hfrelease.publish.target.open_hub` does.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hfrelease.errors import ArtifactError, HfreleaseError, HubError
from hfrelease.files.hashing import WEIGHT_SUFFIX, ContentHash, FileHash, HashCache, hash_artifact, hash_files
from hfrelease.manifest import Artifact, Manifest

if TYPE_CHECKING:
    from huggingface_hub.hf_api import RepoFile as RepoFileEntry

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
READ_TOKEN_VARIABLE = "HF_READ_TOKEN"  # noqa: S105 - the variable's name, not a token

# Identities from the Hub already computed in this process: a pinned commit's files never change.
_HUB_IDENTITIES: dict[tuple[str, str, str], ContentHash] = {}


def hub_endpoint() -> str:
    """The Hub huggingface_hub talks to (HF_ENDPOINT, read by huggingface_hub when it is imported)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def source_token() -> str | None:
    """The token source reads send: `HF_READ_TOKEN` when set, else None (huggingface_hub's own: HF_TOKEN, or
    the one `hf auth login` stored)."""
    return os.environ.get(READ_TOKEN_VARIABLE, "").strip() or None


def is_loopback(url: str) -> bool:
    """`url` names this machine: localhost, or any loopback address (127.0.0.0/8, ::1), in any spelling."""
    import ipaddress

    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in _LOOPBACK or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None  # ::ffff:127.0.0.1
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


@contextlib.contextmanager
def hub_access(endpoint: str | None = None) -> Iterator[None]:
    """huggingface_hub may reach `endpoint` (default: its own) inside this block when it is a Hub on this machine.

    Offline mode stays on for any other endpoint: then only the local cache answers.
    """
    from huggingface_hub import constants

    was_offline = constants.HF_HUB_OFFLINE
    if was_offline and is_loopback(endpoint or hub_endpoint()):
        constants.HF_HUB_OFFLINE = False
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was_offline


def cache_repo_dir(snapshot: Path) -> Path | None:
    """The cache's repo folder (`.../models--o--n`) of a `.../snapshots/<rev>` directory, else None."""
    if snapshot.parent.name == "snapshots" and (snapshot.parent.parent / "blobs").is_dir():
        return snapshot.parent.parent
    return None


def _hub_error(repo: str, revision: str, exc: Exception) -> HfreleaseError:
    """What a failed read of a Hub-pinned source means: the manifest's mistake when the Hub says the repo,
    revision or file does not exist (exit 3, fix release.toml); the Hub's failure when it did not answer, answered
    5xx/429 after retries, or refused the token (exit 7, the same command again later, or another token)."""
    from huggingface_hub import constants

    from hfrelease.hub_errors import hub_failure

    endpoint = hub_endpoint()
    what = f"{repo}@{revision[:12]}: cannot read it from {endpoint}"
    if not _not_the_hubs_failure(exc) and (failure := hub_failure(exc)) is not None:
        return HubError(f"{what}: {failure.message}", hint=failure.hint)
    # Offline mode is the usual reason nothing answers (CI, the demo): said only when it is what stopped us.
    offline = (" (HF_HUB_OFFLINE=1 allows only what is in the local cache)"
               if constants.HF_HUB_OFFLINE and not is_loopback(endpoint) else "")
    return ArtifactError(
        f"{what}{offline}: {exc}",
        hint="Check the source's hub and revision in release.toml, HF_ENDPOINT and HF_TOKEN; "
             "a pinned revision must be a commit the repo holds.",
    )


def _not_the_hubs_failure(exc: BaseException) -> bool:
    """Whether `exc` (anywhere in its chain: a download raises "not in the local cache" from the Hub's 404) is
    the Hub saying the repo, revision or file does not exist, or offline mode keeping the Hub from being asked:
    the manifest's or this machine's setting, not the Hub failing. A gated repo's refusal is the token's."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, GatedRepoError):
            return False
        # Offline mode is this machine's setting, said with its own hint above, as before.
        if isinstance(current, RepositoryNotFoundError | RevisionNotFoundError | EntryNotFoundError
                      | OfflineModeIsEnabled):
            return True
        current = current.__cause__ or current.__context__
    return False


def download_snapshot(repo: str, revision: str) -> Path:
    """The repo's files at `revision` in the Hugging Face cache, downloaded once (a second call reads nothing)."""
    from huggingface_hub import snapshot_download

    try:
        with hub_access():
            return Path(snapshot_download(repo, revision=revision, endpoint=hub_endpoint(), token=source_token()))
    except Exception as exc:  # huggingface_hub raises many types (HTTP, offline, not found): all say the same
        raise _hub_error(repo, revision, exc) from exc


def cached_snapshot(repo: str, revision: str) -> Path | None:
    """`repo` at commit `revision` as the Hugging Face cache already holds it (nothing is fetched), else None.

    Only a commit id is looked up (a source's revision must be one): a branch's cached ref could be stale.
    """
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo, revision=revision, local_files_only=True))
    except Exception:  # huggingface_hub says "not in the cache" with several types (LocalEntryNotFoundError, ...)
        return None


def hash_snapshot(snapshot: Path, *, cache: HashCache | None) -> ContentHash:
    """The content hash of downloaded files, following the cache's links into its own `blobs/`."""
    return hash_artifact(snapshot, cache=cache, link_root=cache_repo_dir(snapshot))


def hub_listing(repo: str, revision: str) -> list[RepoFileEntry]:
    """Every file of `repo` at `revision`, as the Hub lists them (with each LFS file's sha256)."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    try:
        with hub_access():
            api = HfApi(endpoint=hub_endpoint(), token=source_token())
            return [e for e in api.list_repo_tree(repo, revision=revision, recursive=True) if isinstance(e, RepoFile)]
    except Exception as exc:  # see download_snapshot
        raise _hub_error(repo, revision, exc) from exc


def hub_file(repo: str, path: str, revision: str) -> Path:
    """One file of `repo` at `revision`, downloaded once into the Hugging Face cache."""
    from huggingface_hub import hf_hub_download

    try:
        with hub_access():
            return Path(hf_hub_download(repo, path, revision=revision, endpoint=hub_endpoint(), token=source_token()))
    except Exception as exc:  # see download_snapshot
        raise _hub_error(repo, revision, exc) from exc


def hub_content_hash(repo: str, revision: str, *, cache: HashCache | None = None) -> ContentHash:
    """The identity of `repo` at `revision` from the Hub's listing: LFS weights by their stated sha256.

    Equal to `hash_snapshot(download_snapshot(repo, revision))`; `bytes_read` counts only the non-LFS
    weight files downloaded to hash them.
    """
    key = (hub_endpoint(), repo, revision)
    if key in _HUB_IDENTITIES:
        return _HUB_IDENTITIES[key]
    listing = [e for e in hub_listing(repo, revision) if e.path.rsplit("/", 1)[-1].endswith(WEIGHT_SUFFIX)]
    if not listing:
        raise ArtifactError(f"{repo}@{revision[:12]}: no {WEIGHT_SUFFIX} files",
                            hint="Check the source's hub and revision in release.toml.")
    files: list[FileHash] = []
    bytes_read = 0
    for entry in sorted(listing, key=lambda e: e.path):
        if "\n" in entry.path or "\\" in entry.path:
            raise ArtifactError(f"{repo}: the weight file name {entry.path!r} contains a newline or backslash")
        if entry.lfs is not None:
            files.append(FileHash(path=entry.path, size=entry.lfs.size, sha256=entry.lfs.sha256))
            continue
        local = hub_file(repo, entry.path, revision)
        snapshot = local.parents[len(Path(entry.path).parts) - 1]
        before = cache.bytes_read if cache is not None else 0
        (digest,) = hash_files(snapshot, [entry.path], cache, link_root=cache_repo_dir(snapshot))
        bytes_read += (cache.bytes_read - before) if cache is not None else digest.size
        files.append(digest)
    lines = "".join(f"{f.sha256}  {f.path}\n" for f in files)
    found = ContentHash(sha256=hashlib.sha256(lines.encode("utf-8")).hexdigest(), files=tuple(files),
                        bytes_read=bytes_read)
    _HUB_IDENTITIES[key] = found
    return found


def artifact_content(
    manifest: Manifest,
    artifact: Artifact,
    *,
    download: bool,
    cache: HashCache | None,
    hasher: Callable[..., ContentHash] = hash_artifact,
) -> tuple[Path | None, ContentHash]:
    """The artifact's local files (None for a Hub source not downloaded) and its content identity.

    A local `path` is hashed where it is. A Hub source is downloaded when `download` (a job that serves
    it) and hashed through the cache's links, else identified from the Hub without its weights (from the
    cached snapshot of that commit when no Hub answers).
    """
    source = artifact.source
    if source.path is not None:
        directory = manifest.resolve(source.path)
        return directory, hasher(directory, cache=cache)
    assert source.hub is not None and source.revision is not None
    if not download:
        try:
            return None, hub_content_hash(source.hub, source.revision, cache=cache)
        except ArtifactError:
            # No Hub answers (HF_HUB_OFFLINE=1 on a machine with the weights already cached, e.g. a GPU
            # runner that served the reference in an earlier job): the commit's cached files say the same.
            snapshot = cached_snapshot(source.hub, source.revision)
            if snapshot is None:
                raise
            return None, hasher(snapshot, cache=cache, link_root=cache_repo_dir(snapshot))
    snapshot = download_snapshot(source.hub, source.revision)
    return snapshot, hasher(snapshot, cache=cache, link_root=cache_repo_dir(snapshot))
