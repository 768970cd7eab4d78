"""After a publish: download each repo's release tag fresh, check every file, and serve one.

A release is only as good as what a user downloads: this reads the tag back through huggingface_hub's
`snapshot_download` (as `hf download` would), checks every file's size and sha256 against the MANIFEST
it carries, the Hub's own LFS oids and the bundle as published from this machine, and optionally
starts vLLM on the downloaded copy, installing the `vllm_plugin/` shipped inside it, and asks it a
question, so the published artifact is shown to serve, not just to exist.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hfrelease.bundle import MANIFEST_NAME
from hfrelease.errors import HubError, PublishError
from hfrelease.manifest import Manifest
from hfrelease.manifest.selection import select
from hfrelease.serving.command import build_serve_command
from hfrelease.serving.plugin import ensure_plugin
from hfrelease.serving.process import VllmServer, free_port


@dataclass(frozen=True, kw_only=True)
class VerifiedRepo:
    """One repo's release tag as downloaded, what it was compared with, and every problem found (none: verified)."""

    artifact_id: str
    repo: str
    tag: str
    commit: str | None
    directory: Path
    files: int
    compared_with: tuple[str, ...]
    problems: tuple[str, ...]
    local_bundle: Path | None  # the MANIFEST of the local bundle compared with

    @property
    def ok(self) -> bool:
        return not self.problems


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
    from huggingface_hub import HfApi

    from hfrelease.hub_errors import hub_errors
    from hfrelease.publish.record import published_dir, read_local_bundle
    from hfrelease.publish.verify import check_release

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
