"""`hfrelease check`'s core: which manifests to check, and what a valid one declares, as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigProblem
from hfrelease.manifest import MANIFEST_NAME, Manifest


def default_manifests(cwd: Path) -> list[Path]:
    """./release.toml when there is one, else every model_cards/*/release.toml, sorted."""
    here = cwd / MANIFEST_NAME
    if here.is_file():
        return [here]
    return sorted((cwd / "model_cards").glob(f"*/{MANIFEST_NAME}"))


def summarize(manifest: Manifest) -> dict[str, Any]:
    """The manifest's contents in the shape `check --json` prints."""
    return {
        "family": manifest.family.name,
        "version": manifest.family.version,
        "tag": manifest.tag_name(),
        "artifacts": [
            {"id": a.id, "kind": a.kind, "repo": a.repo, "publish": a.publish} for a in manifest.artifact
        ],
        "gates": [g.id for g in manifest.gate],
        "speculative": [s.id for s in manifest.speculative],
        "workloads": [w.id for w in manifest.workload],
    }


def tree_problems(manifest: Manifest) -> list[ConfigProblem]:
    """Every file the release would ship or quote that the allowlist refuses, found before anything runs.

    The same gathering `hfrelease bundle` does (declared files, checkpoints, rendered cards, the ledger, the
    plugin; Hub sources are left to the bundle), and the sections and ledger entries a render would read.
    """
    from hfrelease.bundle import file_problems
    from hfrelease.cards.inputs import results_problems, section_problems

    problems = file_problems(manifest)
    problems += [ConfigProblem(location=path, message=message) for path, message in section_problems(manifest)]
    # The ledger as cards read it (every artifact's, published or not), where the bundle has not said it yet.
    seen = {p.location.rstrip("/") for p in problems}
    problems += [ConfigProblem(location=path, message=message) for path, message in results_problems(manifest)
                 if path.rstrip("/") not in seen]  # fmt: skip
    return problems
