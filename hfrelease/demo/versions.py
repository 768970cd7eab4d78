"""The demo's two versions: its previous release (v0.0, the draft's previous head) and the current one.

The draft's vendor repo holds two heads (`hfrelease.demo.vendor`): the previous one (the draft trained for
two epochs) and, one commit later, the current one (four epochs). The demo releases both, as a vendor
does over time, so `hfrelease compare v0.0 v0.1` and `render --since v0.0` have two real releases to read:

- `write_previous_family` turns a working copy of model_cards/demo into version 0.0: its draft pinned to the
  previous head with that head's training provenance, and only what comparing the two drafts needs (the
  draft, its target, and the workloads that serve the draft, each without speculation beside it; no quality
  or draft gates), so the previous release costs the demo one eval job of the draft.
- `pin_working_copy` and `make_previous_release` are the maintainer's steps `hfrelease demo pin` and
  `hfrelease demo previous` take, each saying what it did, a line at a time.
- `push_heads` makes each vendor repo's main on the demo's Hub hold the head the working copy pins, as the
  vendor's timeline had it: main held the previous head when v0.0 was released from it (a release from a
  repo's own pinned weights is refused when main holds others), and the new head is pushed on top before
  v0.1. The demo's Hub starts as a copy of the build's, whose main holds the new head.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hfrelease.demo.eagle3_training import (
    EAGLE3,
    EAGLE3_PREVIOUS,
    EAGLE3_PREVIOUS_TRAINING,
    EAGLE3_TRAINING,
    PREVIOUS_DESCRIPTION,
    PREVIOUS_TRAINED_WITH,
)
from hfrelease.demo.paths import default_build_dir
from hfrelease.demo.vendor import (
    PREVIOUS_HEADS,
    VENDOR_REPOS,
    copy_training,
    pin_manifest,
    push_head,
    read_pins,
    read_previous_pins,
)
from hfrelease.errors import ConfigError, ConfigProblem

PREVIOUS_VERSION = "0.0"
_TRAINING_DIR = "draft-training"  # where the demo manifest's draft declares its provenance files
_PREVIOUS_TRAINING = "draft-previous-training"  # the build's provenance of the previous head
# Drafts sourced from a local build directory that has a previous head too (hfrelease.demo.eagle3_training):
# build directory -> (the previous head's directory, where the family declares the provenance files, where the
# build keeps the previous head's provenance).
LOCAL_PREVIOUS_HEADS: dict[str, tuple[str, str, str]] = {
    EAGLE3: (EAGLE3_PREVIOUS, EAGLE3_TRAINING, EAGLE3_PREVIOUS_TRAINING),
}


def write_previous_family(family_dir: Path, build_dir: Path, *, version: str = PREVIOUS_VERSION) -> list[str]:
    """Rewrite the working copy `family_dir` (a copy of model_cards/demo) as the demo's previous release; return
    what was changed, one line each. Comments of the manifest are not kept: it is a generated working copy."""
    import tomllib

    import tomli_w

    manifest_file = family_dir / "release.toml"
    data = tomllib.loads(manifest_file.read_text(encoding="utf-8"))
    pins = {**read_pins(build_dir), **read_previous_pins(build_dir)}
    drafts = [a for a in data.get("artifact", []) if _hub(a) in PREVIOUS_HEADS or _local_head(a) is not None]
    if not drafts:
        raise ConfigError(str(manifest_file), [ConfigProblem(
            location="artifact.source", message=f"no draft sourced from {', '.join(sorted(PREVIOUS_HEADS))} "
            f"or from a build directory {', '.join(sorted(LOCAL_PREVIOUS_HEADS))}")])
    kept = {a["id"] for a in drafts} | {a["draft"]["target"] for a in drafts if "draft" in a}
    artifacts = [a for a in data["artifact"] if a["id"] in kept]
    changes = [f"version {data['family']['version']} -> {version}",
               f"artifacts: {', '.join(a['id'] for a in artifacts)} (dropped "
               f"{', '.join(a['id'] for a in data['artifact'] if a['id'] not in kept)})"]
    data["family"]["version"] = version
    for artifact in artifacts:
        local = _local_head(artifact)
        if local is not None:
            previous_dir, declared, provenance = LOCAL_PREVIOUS_HEADS[local]
            path = str(artifact["source"]["path"])
            artifact["source"]["path"] = path[: len(path) - len(local)] + previous_dir
            _drop_draft_gates(artifact)
            artifact["draft"]["trained_with"] = PREVIOUS_TRAINED_WITH
            artifact["description"] = PREVIOUS_DESCRIPTION
            artifact["files"] = copy_training(build_dir, family_dir, declared, source_dir=provenance)
            changes.append(f"{artifact['id']}: the previous head ({artifact['source']['path']}) and its training "
                           f"provenance ({len(artifact['files'])} files)")
            continue
        repo = _hub(artifact)
        if repo in pins:
            artifact["source"]["revision"] = pins[repo]
            changes.append(f"{artifact['id']}: {repo} pinned to {pins[repo]}"
                           + (" (the previous head)" if repo in PREVIOUS_HEADS else ""))
        if repo in PREVIOUS_HEADS:
            _drop_draft_gates(artifact)
            artifact["files"] = copy_training(build_dir, family_dir, _TRAINING_DIR, source_dir=_PREVIOUS_TRAINING)
            changes.append(f"{artifact['id']}: the previous head's training provenance "
                           f"({len(artifact['files'])} files)")
    data["artifact"] = artifacts
    configs = {s["id"] for s in data.get("speculative", []) if s.get("draft") in kept}
    data["speculative"] = [s for s in data.get("speculative", []) if s["id"] in configs]
    workloads = []
    for workload in data.get("workload", []):
        served = [c for c in workload.get("speculative", ["none"]) if c in configs]
        if served and set(workload.get("artifacts", [])) <= kept:
            # Without a context-length sweep: its points are not compared (`hfrelease compare` reads speed points).
            kept_workload = {k: v for k, v in workload.items() if k != "input_lens"}
            workloads.append({**kept_workload, "speculative": ["none", *served]})
    data["workload"] = workloads
    changes.append(f"workloads: {', '.join(w['id'] for w in workloads)} with "
                   f"{', '.join(['none', *sorted(configs)])}; no quality or draft gates")
    data.pop("gate", None)
    manifest_file.write_text(tomli_w.dumps(data), encoding="utf-8")
    return changes


def pin_working_copy(manifest: Path, *, build_dir: Path | None = None, hub_root: Path | None = None) -> Iterator[str]:
    """Pin a working copy's release.toml (`manifest`, or its directory) to the revisions the build (default:
    build/demo in the checkout) uploaded, copy the draft's training provenance from the same build and, with
    `hub_root`, make the vendor repos' main there hold the pinned heads; one line per thing done."""
    target = manifest / "release.toml" if manifest.is_dir() else manifest
    build = build_dir or default_build_dir()
    pins = read_pins(build)
    yield from (f"pinned {line} in {target}" for line in pin_manifest(target, pins))
    yield from (f"copied the draft's training provenance {name}" for name in copy_training(build, target.parent))
    yield from (f"copied the EAGLE-3 head's training provenance {name}"
                for name in copy_training(build, target.parent, EAGLE3_TRAINING))
    if hub_root is not None:
        yield from push_heads(hub_root, build, pins)


def make_previous_release(family: Path, *, hub_root: Path, build_dir: Path | None = None) -> Iterator[str]:
    """Make `family` (a working copy of model_cards/demo) the demo's previous release (`write_previous_family`)
    and the vendor repos' main on the Hub in `hub_root` hold the heads it pins; one line per thing done."""
    build = build_dir or default_build_dir()
    yield from write_previous_family(family, build)
    yield from push_heads(hub_root, build, {**read_pins(build), **read_previous_pins(build)})


def push_heads(hub_root: Path, build_dir: Path, pins: Mapping[str, str]) -> list[str]:
    """Make each vendor repo's main on the Hub in `hub_root` hold the head of `pins` (repo -> revision, as
    `read_pins` or `read_previous_pins` give them): the build directory recorded for that revision is uploaded
    on top of main (no commit when main already holds it). Returns one line per repo."""
    previous = read_previous_pins(build_dir)
    lines = []
    for repo, revision in sorted(pins.items()):
        directory = PREVIOUS_HEADS[repo] if previous.get(repo) == revision else VENDOR_REPOS[repo]
        commit = push_head(hub_root, repo, build_dir / directory)
        lines.append(f"{repo}: main holds {directory} ({revision[:12]}) at {commit[:12]}")
    return lines


def _drop_draft_gates(artifact: dict[str, Any]) -> None:
    """No acceptance or speed gates for a previous head (its losslessness stays gated): it is measured to be
    compared with (lower acceptance, by design), and a failed gate of a published artifact would stop its
    release. Nor its draft x target matrix: the targets besides its own are not in this version."""
    draft = artifact.get("draft", {})
    for key in ("min_acceptance_rate", "min_acceptance_length", "min_speedup", "matrix"):
        draft.pop(key, None)


def _local_head(artifact: Mapping[str, object]) -> str | None:
    """The build directory of a draft sourced from the demo build that has a previous head (a key of
    LOCAL_PREVIOUS_HEADS), else None."""
    source = artifact.get("source")
    if artifact.get("kind") != "draft" or not isinstance(source, dict) or "path" not in source:
        return None
    name = Path(str(source["path"])).name
    return name if name in LOCAL_PREVIOUS_HEADS else None


def _hub(artifact: Mapping[str, object]) -> str | None:
    source = artifact.get("source")
    return str(source["hub"]) if isinstance(source, dict) and "hub" in source else None
