"""After a publish: download each repo's release tag fresh, check it against its MANIFEST, and serve one.

A release is only as good as what a user downloads: this reads the tag back through huggingface_hub's
`snapshot_download` (as `hf download` would), verifies every file's size and sha256, and optionally
starts vLLM on the downloaded copy, installing the `vllm_plugin/` shipped inside it, and asks it a
question, so the published artifact is shown to serve, not just to exist.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hfrelease.errors import PublishError
from hfrelease.manifest import Manifest
from hfrelease.serving.command import build_serve_command
from hfrelease.serving.plugin import ensure_plugin
from hfrelease.serving.process import VllmServer, free_port


@dataclass(frozen=True, kw_only=True)
class VerifiedRepo:
    artifact_id: str
    repo: str
    tag: str
    directory: Path
    files: int


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
) -> list[VerifiedRepo]:
    """Download every published artifact's release tag into `out_dir/<id>` and check it file by file."""
    from hfrelease.publish import verify_release

    tag = manifest.tag_name()
    verified = []
    for artifact in manifest.artifact:
        if not artifact.publish or (artifacts and artifact.id not in artifacts):
            continue
        directory = verify_release(artifact.repo, tag=tag, directory=out_dir / artifact.id, endpoint=endpoint,
                                   token=token)
        count = sum(1 for p in directory.rglob("*") if p.is_file() and ".cache" not in p.parts)
        verified.append(VerifiedRepo(artifact_id=artifact.id, repo=artifact.repo, tag=tag, directory=directory,
                                     files=count))
    if not verified:
        raise PublishError("no published artifact to verify", hint="Check [[artifact]].publish in the manifest.")
    return verified


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
