"""Fixtures of the evaluation tests: the fixture family, loaded, with weights (gate families and fake servers
are tests/gate_fixtures.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.manifest import Manifest


@pytest.fixture
def family(fixture_family: Path) -> Manifest:
    """The fixture family, loaded, with small random safetensors weights in each checkpoint (each its own hash)."""
    import numpy as np
    from safetensors.numpy import save_file

    from hfrelease.manifest import load_manifest

    for name, seed in (("ref", 0), ("fp8", 1), ("draft", 2)):
        weights = np.random.default_rng(seed).standard_normal((4, 4)).astype("float32")
        save_file({"w": weights}, str(fixture_family / "checkpoints" / name / "model.safetensors"))
    return load_manifest(fixture_family)
