"""The demo family's vendor repo: its reference published to a built-in Hub, and the pin that names it.

A maintainer's real release starts from a reference someone else published (the flagship pins
`Nanbeige/Nanbeige4.2-3B` at a commit). The demo takes the same path: `hfrelease demo build` uploads the
reference it trained to a built-in Hub kept in the build (`build/demo/hub/`, file-backed) as the vendor
repo `hfrelease-demo/tiny-reference`, and records the commit in `build/demo/vendor.json`. The demo
manifest sources the reference as `{ hub, revision }`; the quants the demo makes stay local `path`
sources, so both kinds of source run in every demo and in CI.

The revision is a commit id of *that* Hub: a commit id covers its date and a nonce, and a fresh machine
trains slightly different bytes, so another build has another revision. The committed manifest holds
the revision of the build its recorded results came from (`hfrelease check` needs only its shape); a
working copy is pinned to this machine's build with `hfrelease demo pin` -- the maintainer's own step,
"upload, then pin the revision in release.toml". A working copy left unpinned fails loudly when the
reference is read (the Hub has no such commit), never silently.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hfrelease.errors import ConfigError, ConfigProblem, EnvironmentProblem

VENDOR_REPO = "hfrelease-demo/tiny-reference"
HUB_DIR = "hub"
PINS_FILE = "vendor.json"
_SHA = re.compile(r"^[0-9a-f]{40}$")


def publish_vendor_repos(out_dir: Path, *, reference: Path, stamp_files: dict[str, str]) -> dict[str, str]:
    """Upload the reference to the build's Hub (`out_dir/hub`) unless already there; return {repo: revision}.

    `stamp_files` (the build stamp's sha256 per file) decides whether the recorded upload is still the
    build's: the upload is skipped when `vendor.json` records the same reference files.
    """
    wanted = {path: sha for path, sha in stamp_files.items() if path.startswith(reference.name + "/")}
    recorded = _read(out_dir / PINS_FILE)
    if recorded.get("files") == wanted and (out_dir / HUB_DIR).is_dir():
        pins = recorded.get("pins")
        if isinstance(pins, dict) and all(isinstance(v, str) and _SHA.match(v) for v in pins.values()):
            return {str(k): str(v) for k, v in pins.items()}
    from huggingface_hub import HfApi

    from hfrelease.hub import serve
    from hfrelease.publish.target import disable_xet
    from hfrelease.sources import hub_access

    disable_xet()
    server = serve(out_dir / HUB_DIR)
    try:
        assert server.token_file is not None  # serve() without tokens keeps its own
        api = HfApi(endpoint=server.url, token=server.token_file.read_text().strip())
        # The built-in Hub is on this machine: reachable with HF_HUB_OFFLINE=1 (nothing else is).
        with hub_access(server.url):
            api.create_repo(VENDOR_REPO, exist_ok=True)
            # Re-uploading identical files makes no commit: the revision stays what it was.
            commit = api.upload_folder(repo_id=VENDOR_REPO, folder_path=reference,
                                       commit_message="the vendor's reference (hfrelease demo build)")
            revision = commit.oid
    finally:
        server.shutdown()
    pins = {VENDOR_REPO: revision}
    target = out_dir / PINS_FILE
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pins": pins, "files": wanted}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(target)
    return pins


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_pins(out_dir: Path) -> dict[str, str]:
    """The build's vendor repos and their revisions (`vendor.json`); EnvironmentProblem when there are none."""
    pins = _read(out_dir / PINS_FILE).get("pins")
    if not isinstance(pins, dict) or not pins:
        raise EnvironmentProblem(f"{out_dir / PINS_FILE}: no vendor repo recorded",
                            hint="Run `hfrelease demo build` (it publishes the vendor's reference).")
    return {str(k): str(v) for k, v in pins.items()}


def pin_manifest(manifest_file: Path, pins: dict[str, str]) -> list[str]:
    """Rewrite each `source = { hub = "<repo>", revision = "..." }` of a pinned repo; return the lines changed.

    A text edit (comments and layout stay); every pinned repo must appear as a Hub source.
    """
    text = manifest_file.read_text(encoding="utf-8")
    changed: list[str] = []
    missing = []
    for repo, revision in sorted(pins.items()):
        pattern = re.compile(r'(source\s*=\s*\{\s*hub\s*=\s*"' + re.escape(repo) + r'"\s*,\s*revision\s*=\s*")'
                             r'([0-9a-fA-F]*)(")')
        if not pattern.search(text):
            missing.append(repo)
            continue
        text, count = pattern.subn(r"\g<1>" + revision + r"\g<3>", text)
        changed.append(f"{repo} -> {revision} ({count} source{'s' if count != 1 else ''})")
    if missing:
        raise ConfigError(str(manifest_file), [ConfigProblem(
            location="artifact.source", message=f"no source = {{ hub = {repo!r}, revision = ... }} to pin")
            for repo in missing])
    manifest_file.write_text(text, encoding="utf-8")
    return changed
