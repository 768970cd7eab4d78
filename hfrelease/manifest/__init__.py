"""The family manifest: `release.toml` parsed once into frozen, typed values (see `model.py`)."""

from hfrelease.manifest.loading import MANIFEST_NAME, find_manifest, load_manifest, parse_manifest
from hfrelease.manifest.model import Artifact, Gate, Manifest, Serve, Speculative, Workload

__all__ = [
    "MANIFEST_NAME",
    "Artifact",
    "Gate",
    "Manifest",
    "Serve",
    "Speculative",
    "Workload",
    "find_manifest",
    "load_manifest",
    "parse_manifest",
]
