"""Where a card's figures can be checked: each gate's Every Eval Ever record, its path in the published repo
and its URL at the release tag, which the front matter's `source.url` points at.

The records are laid out as Every Eval Ever's own datastore lays them out (`data/{benchmark}/{developer}/
{model}/{uuid}.json`, the instance-level rows beside them as `{uuid}_samples.jsonl`), under `every_eval_ever/`,
so that folder can be contributed to that project as it is. The uuid is derived from what the record holds
(the repo, the gate and the ledger records it was exported from), so an unchanged ledger re-renders the same
paths, and a re-measured gate gets a new one.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

from hfrelease.cards.text import hub_url
from hfrelease.manifest import Artifact, Gate, Manifest

EEE_DIR = "every_eval_ever"  # the folder beside the card that holds the records


def record_uuid(artifact: Artifact, gate: Gate, record_names: Sequence[str]) -> str:
    """A version-4-shaped uuid (the schema's `file_path` pattern requires one) from sha256 of what the record
    is: the same inputs always give the same id."""
    digest = hashlib.sha256("\n".join([artifact.repo, gate.id, *record_names]).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def record_dir(artifact: Artifact, gate: Gate) -> str:
    """`data/{benchmark}/{developer}/{model}`, relative to `EEE_DIR`: the gate is the benchmark (two gates on
    one task are two evaluations), the repo's owner and name the developer and model."""
    owner, name = artifact.repo.split("/", 1)
    return f"data/{gate.id}/{owner}/{name}"


def record_path(artifact: Artifact, gate: Gate, record_names: Sequence[str]) -> str:
    """The aggregate record's path in the artifact's repo."""
    return f"{EEE_DIR}/{record_dir(artifact, gate)}/{record_uuid(artifact, gate, record_names)}.json"


def at_tag(manifest: Manifest, artifact: Artifact, path: str) -> str:
    """`path` in `artifact`'s repo at the release tag: where a reader finds the evidence once published."""
    return f"{hub_url(artifact.repo)}/blob/{manifest.tag_name()}/{path}"
