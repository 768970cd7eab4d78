"""Reading a release back from the Hub: what it serves, checked against the bundle, file by file (sha256, size).

Three depths, one job: `verify_revision` (metadata of every file, plus MANIFEST and the card downloaded back and
hashed; never a weight byte) runs on every staged and published commit; `check_release` downloads a whole
tag with `snapshot_download` (as `hf download` would) and hashes every byte against the MANIFEST it carries,
the Hub's own LFS oids and, when this machine published it, the bundle as it was published; `verify_family`
(`hfrelease verify`, the release job's last step) does that for every published repo, and `serve_downloaded`
starts vLLM on a downloaded copy, installing the `vllm_plugin/` shipped inside it, and asks it a question, so
the published artifact is shown to serve, not just to exist.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_url, hf_raise_for_status, snapshot_download

# Documented public helpers (huggingface_hub's "Utilities" reference), exported lazily, which mypy cannot see
# (`utils` made lazy: https://github.com/huggingface/huggingface_hub/pull/4914; the lazy facades' typing:
# https://github.com/huggingface/huggingface_hub/issues/1662).
from huggingface_hub.utils import build_hf_headers, http_backoff  # type: ignore[attr-defined]

from hfrelease.bundle import ATTESTATION_NAME, MANIFEST_NAME, RepoBundle, parse_manifest
from hfrelease.errors import HubError, PublishError
from hfrelease.files.hashing import FileHash
from hfrelease.manifest import Manifest
from hfrelease.manifest.selection import select
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


@dataclass(frozen=True, kw_only=True)
class VerifiedRepo(ReleaseCheck):
    """A family artifact's release check (`ReleaseCheck`, none of its problems: verified), with the artifact it
    publishes and the local bundle it was compared with."""

    artifact_id: str
    local_bundle: Path | None  # the MANIFEST of the local bundle compared with


@dataclass(frozen=True, kw_only=True)
class ServedCheck:
    artifact_id: str
    command: str
    question: str
    answer: str


def verify_family(
    manifest: Manifest,
    *,
    endpoint: str,
    token: str | None,
    out_dir: Path,
    artifacts: tuple[str, ...] = (),
    bundle_dir: Path | None = None,
    attested_by: str | None = None,
) -> list[VerifiedRepo]:
    """Download every published artifact's release tag into `out_dir/<id>` and check it file by file.

    Each file is compared with the MANIFEST the release carries, the Hub's LFS oid (or git blob id), and
    the local bundle: `bundle_dir/<id>/MANIFEST` (a `hfrelease bundle --out` directory), by default the
    MANIFESTs `publish` kept in `<family>/.hfrelease/bundle/<tag>/` when this machine published the release.
    Every repo is checked and reported, however many fail; `verification_error` turns failures into one error.
    """
    from hfrelease.hub_errors import hub_errors
    from hfrelease.publish.record import published_dir, read_local_bundle

    select(manifest, artifacts=artifacts)
    tag = manifest.tag_name()
    explicit = bundle_dir is not None
    bundles = bundle_dir if bundle_dir is not None else published_dir(manifest.root, tag)
    api = HfApi(endpoint=endpoint, token=token)
    verified = []
    for artifact in manifest.artifact:
        if not artifact.publish or (artifacts and artifact.id not in artifacts):
            continue
        directory = out_dir / artifact.id
        problems: list[str] = []
        local = None
        try:
            local = read_local_bundle(bundles, artifact.id)
        except (ValueError, UnicodeDecodeError) as error:
            problems.append(f"the local bundle's {bundles / artifact.id / MANIFEST_NAME} is unreadable: {error}")
        if local is None and explicit and not problems:
            # Asked to compare with a bundle that does not hold this repo: not silently skipped.
            problems.append(f"no local bundle for {artifact.id}: {bundles / artifact.id / MANIFEST_NAME} is missing")
        try:
            with hub_errors(f"verifying {artifact.repo} @ {tag}"):
                checked = check_release(artifact.repo, tag=tag, directory=directory, api=api,
                                        local=local.entries if local else None,
                                        local_manifest_sha256=local.manifest_sha256 if local else None,
                                        attested_by=attested_by)
            commit, files, compared = checked.commit, checked.files, checked.compared_with
            problems += checked.problems
        except HubError as error:
            # A repo the Hub says is not there (deleted, renamed) is this repo's finding, and must not hide the
            # others' results; a refused token, a failing or silent Hub is every repo's, and ends the command.
            if error.status != 404:
                raise
            commit, files, compared = None, 0, ()
            problems.append(error.message)
        verified.append(VerifiedRepo(artifact_id=artifact.id, repo=artifact.repo, tag=tag, commit=commit,
                                     directory=directory, files=files, compared_with=compared,
                                     problems=tuple(problems), local_bundle=local.path if local else None))
    if not verified:
        raise PublishError("no published artifact to verify", hint="Check [[artifact]].publish in the manifest.")
    return verified


def verification_error(verified: Sequence[VerifiedRepo]) -> PublishError | None:
    """One error naming every repo that failed and each of its problems (exit 7), or None when all passed."""
    failed = [v for v in verified if not v.ok]
    if not failed:
        return None
    lines = "\n".join(f"  - {v.repo} @ {v.tag}: {problem}" for v in failed for problem in v.problems)
    return PublishError(
        f"{len(failed)} of {len(verified)} published repo(s) do not match what was released:\n{lines}",
        hint="What the Hub serves is not what was published. Look at each repo's commits and tag on the Hub; "
             "re-publishing under the same tag is refused, so fix the repo there or release a new version.",
    )


def serve_downloaded(
    manifest: Manifest,
    artifact_id: str,
    directory: Path,
    *,
    log_path: Path,
    question: str = "What is 3 + 4?",
    echo: Callable[[str], None] | None = None,
) -> ServedCheck:
    """Serve the downloaded copy of an artifact with vLLM (its shipped plugin installed) and ask one question."""
    from hfrelease.serving.command import build_serve_command
    from hfrelease.serving.plugin import ensure_plugin
    from hfrelease.serving.process import VllmServer, free_port

    artifact = manifest.artifact_by_id(artifact_id)
    port = free_port()
    command = build_serve_command(manifest, artifact, model=str(directory), host="127.0.0.1", port=port,
                                  vllm=str(Path(sys.executable).with_name("vllm")))
    shipped = directory / "vllm_plugin"
    if command.plugin:
        if not shipped.is_dir():
            raise PublishError(f"{artifact.repo}: the release ships no vllm_plugin/, but serving it needs one")
        ensure_plugin(shipped, echo=echo)  # the copy users download, not the family's source tree
    with VllmServer(command, log_path=log_path, port=port) as server:
        server.wait_until_ready()
        body = json.dumps({
            "model": artifact.repo,
            "messages": [{"role": "user", "content": question}],
            "max_tokens": 64,
            "temperature": 0,
            "chat_template_kwargs": {"enable_thinking": False},
        }).encode()
        request = urllib.request.Request(  # noqa: S310 - the loopback server started above
            f"{server.endpoint.base_url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - loopback server
            reply = json.loads(response.read().decode())
    answer = str(reply["choices"][0]["message"].get("content") or "").strip()
    return ServedCheck(artifact_id=artifact_id, command=command.display(), question=question, answer=answer)
