"""The demo family's vendor repos: what exists before a release, published to a built-in Hub, and the pins.

A maintainer's real release starts from repos that exist before it: the flagship pins the vendor's
`Nanbeige/Nanbeige4.2-3B` at a commit, and publishes its EAGLE-3 draft from the draft's own repo, which
holds the weights uploaded before the release. The demo takes the same path: `hfrelease demo build` uploads
the reference it trained (`hfrelease-demo/tiny-reference`) and its draft model (`hfrelease-demo/tiny-draft`,
a previous release's draft) to a built-in Hub kept in the build (`build/demo/hub/`, file-backed), and
records each commit in `build/demo/vendor.json`. The demo manifest sources both as `{ hub, revision }`; the
quants the demo makes (and the EAGLE-3 head) stay local `path` sources, so both kinds of source -- for
served models and for drafts -- run in every demo and in CI.

The revision is a commit id of *that* Hub: a commit id covers its date and a nonce, and a fresh machine
trains slightly different bytes, so another build has other revisions. The committed manifest holds the
revisions of the build its recorded results came from (`hfrelease check` needs only their shape); a
working copy is pinned to this machine's build with `hfrelease demo pin` -- the maintainer's own step,
"upload, then pin the revision in release.toml". A working copy left unpinned fails loudly when a vendor
repo is read (the Hub has no such commit), never silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from hfrelease.errors import ConfigError, ConfigProblem, EnvironmentProblem

REFERENCE_REPO = "hfrelease-demo/tiny-reference"
DRAFT_REPO = "hfrelease-demo/tiny-draft"
# Each vendor repo and the build directory (artifact id) it is uploaded from.
VENDOR_REPOS: Mapping[str, str] = {REFERENCE_REPO: "reference", DRAFT_REPO: "draft"}
# A vendor repo's previous head (repo -> build directory): the draft trained for fewer epochs, an earlier
# commit of its repo than the head, as a vendor's history holds the head a previous release shipped. The
# demo releases it as its previous version and compares the two (`hfrelease demo previous`, scripts/demo).
PREVIOUS_HEADS: Mapping[str, str] = {DRAFT_REPO: "draft-previous"}
HUB_DIR = "hub"
PINS_FILE = "vendor.json"
_SHA = re.compile(r"^[0-9a-f]{40}$")


def publish_vendor_repos(
    out_dir: Path, *, stamp_files: Mapping[str, str], repos: Mapping[str, str] = VENDOR_REPOS
) -> dict[str, str]:
    """Upload each vendor repo (`repos`: repo -> build directory) to the build's Hub (`out_dir/hub`) unless
    already there; return {repo: revision}.

    `stamp_files` (the build stamp's sha256 per file) decides whether a recorded upload is still the
    build's: a repo is uploaded again only when its directory's files differ from those `vendor.json`
    records for it (or it has no record: a build from before it was a vendor repo is upgraded in place).
    Re-uploading identical files makes no commit, so a repo's revision only changes with its files.
    """
    recorded = _read(out_dir / PINS_FILE)
    listed = recorded.get("repos")
    known = listed if isinstance(listed, dict) else {}
    hub_there = (out_dir / HUB_DIR).is_dir()
    entries: dict[str, dict[str, object]] = {}
    todo: dict[str, dict[str, str]] = {}
    for repo, directory in repos.items():
        wanted = {path: sha for path, sha in stamp_files.items() if path.startswith(directory + "/")}
        entry = known.get(repo)
        if (hub_there and isinstance(entry, dict) and entry.get("files") == wanted
                and _SHA.match(str(entry.get("revision", "")))):
            entries[repo] = entry
        else:
            todo[repo] = wanted
    # A previous head is uploaded before its repo's head: when it is missing (or its files changed), both are
    # uploaded in that order, so the head is always the newer commit (main holds the head's weights).
    previous = _read(out_dir / PINS_FILE).get("previous")
    earlier = dict(previous) if isinstance(previous, dict) else {}
    for repo, directory in PREVIOUS_HEADS.items():
        wanted = {path: sha for path, sha in stamp_files.items() if path.startswith(directory + "/")}
        entry = earlier.get(repo)
        if repo not in repos or not wanted or (hub_there and isinstance(entry, dict) and entry.get("files") == wanted
                                                 and repo not in todo):
            continue
        revision = _upload(out_dir, {repo: out_dir / directory})[repo]
        earlier[repo] = {"revision": revision, "directory": directory, "files": wanted}
        todo[repo] = {path: sha for path, sha in stamp_files.items() if path.startswith(repos[repo] + "/")}
    if todo:
        for repo, revision in _upload(out_dir, {repo: out_dir / repos[repo] for repo in todo}).items():
            entries[repo] = {"revision": revision, "directory": repos[repo], "files": todo[repo]}
        _write(out_dir / PINS_FILE, entries, previous=earlier)
    return {repo: str(entries[repo]["revision"]) for repo in repos}


def _upload(out_dir: Path, folders: Mapping[str, Path]) -> dict[str, str]:
    """Each folder uploaded to its repo on the build's Hub (served for the upload); {repo: commit}."""
    return _upload_to(out_dir / HUB_DIR, folders)


def _upload_to(hub_root: Path, folders: Mapping[str, Path]) -> dict[str, str]:
    """Each folder uploaded to its repo on the Hub in `hub_root` (served for the upload); {repo: commit}."""
    from huggingface_hub import HfApi

    from hfrelease.files.sources import hub_access
    from hfrelease.hub import serve
    from hfrelease.publish.target import disable_xet

    disable_xet()
    server = serve(hub_root)
    revisions: dict[str, str] = {}
    try:
        assert server.token_file is not None  # serve() without tokens keeps its own
        api = HfApi(endpoint=server.url, token=server.token_file.read_text().strip())
        # The built-in Hub is on this machine: reachable with HF_HUB_OFFLINE=1 (nothing else is).
        with hub_access(server.url):
            for repo, folder in folders.items():
                api.create_repo(repo, exist_ok=True)
                commit = api.upload_folder(repo_id=repo, folder_path=folder,
                                           commit_message=f"the vendor's {folder.name} (hfrelease demo)")
                revisions[repo] = commit.oid
    finally:
        server.shutdown()
    return revisions


def _write(target: Path, entries: Mapping[str, Mapping[str, object]],
           previous: Mapping[str, object] | None = None) -> None:
    data: dict[str, object] = {"repos": dict(entries)}
    if previous:
        data["previous"] = dict(previous)
    reference = entries.get(REFERENCE_REPO)
    if reference is not None:
        # `pins` and `files` keep the layout of builds from before the draft was a vendor repo, naming the
        # reference only: build/ outlives a checkout (branches and worktrees share it), and an older
        # `hfrelease demo pin` refuses a pin its manifest has no Hub source for.
        data.update(pins={REFERENCE_REPO: reference["revision"]}, files=reference["files"])
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(target)


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_pins(out_dir: Path) -> dict[str, str]:
    """The build's vendor repos and their revisions (`vendor.json`); EnvironmentProblem when there are none."""
    return _recorded(out_dir, "repos", VENDOR_REPOS, f"the vendor repos {', '.join(sorted(VENDOR_REPOS))} are not "
                     "all recorded", "it publishes the vendor repos; a build made before one of them was a vendor "
                     "repo is upgraded in place")


def read_previous_pins(out_dir: Path) -> dict[str, str]:
    """The build's previous heads and their revisions (`vendor.json`'s `previous`); EnvironmentProblem when the
    build has none (made before the demo had a previous version)."""
    return _recorded(out_dir, "previous", PREVIOUS_HEADS, f"the previous heads of {', '.join(sorted(PREVIOUS_HEADS))}"
                     " are not recorded", "a build made before the demo had a previous version gets one in place, "
                     "training only the previous draft")


def _recorded(out_dir: Path, key: str, wanted: Mapping[str, str], missing: str, why: str) -> dict[str, str]:
    entries = _read(out_dir / PINS_FILE).get(key)
    pins = {str(repo): str(entry.get("revision")) for repo, entry in entries.items()
            if isinstance(entry, dict)} if isinstance(entries, dict) else {}
    if set(pins) != set(wanted):
        raise EnvironmentProblem(f"{out_dir / PINS_FILE}: {missing}", hint=f"Run `hfrelease demo build` ({why}).")
    return pins


def push_head(hub_root: Path, repo: str, folder: Path) -> str:
    """Make `repo`'s main on the Hub in `hub_root` hold `folder`'s files (an upload on top of main when it does not:
    the vendor pushing that head); return main's commit. Files already there make no commit."""
    return _upload_to(hub_root, {repo: folder})[repo]


def pin_manifest(manifest_file: Path, pins: Mapping[str, str]) -> list[str]:
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


def copy_training(build_dir: Path, family_dir: Path, training_dir: str = "draft-training",
                  source_dir: str | None = None) -> list[str]:
    """The build's draft training provenance (train_command.txt, <epoch>/val_metrics.json; from `source_dir`,
    default `training_dir`) copied into the family's `training_dir`, which the demo manifest's draft declares
    in `files`: like its pins, a working copy's provenance is this machine's build's. Returns the files copied."""
    import shutil

    source = build_dir / (source_dir or training_dir)
    if not (source / "train_command.txt").is_file():
        raise EnvironmentProblem(f"{source}: no draft training files (train_command.txt, <epoch>/val_metrics.json)",
                                 hint="Run `hfrelease demo build` (a build made before they existed is upgraded "
                                      "in place, retraining only the draft).")
    target = family_dir / training_dir
    shutil.rmtree(target, ignore_errors=True)
    copied = []
    for path in sorted(source.rglob("*")):
        if path.is_file() and not path.is_symlink():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / path.relative_to(source))
            copied.append((target / path.relative_to(source)).relative_to(family_dir).as_posix())
    return copied
