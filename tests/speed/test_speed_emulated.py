"""Points an emulation kernel served (NVFP4 on a CPU build: `SpeedRow.emulated`, from the record's
`hardware.emulated`, see hfrelease.serving.emulation) are no basis for a best config."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hfrelease.manifest import load_manifest
from hfrelease.speed.result import SpeedRow
from hfrelease.speed.verdict import best_configs, with_speedups

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _row(spec: str, tps: float, artifact: str) -> SpeedRow:
    return SpeedRow(artifact_id=artifact, workload_id="chat", speculative=spec, concurrency=1, draft_id=None,
                    origin="measured", status="ok", metrics={"output_throughput": tps},
                    spread={"output_throughput": [tps - 1, tps + 1]})


def test_an_emulated_artifact_gets_no_best_config() -> None:
    """The reference's points give its best config; the emulated quant's, ten times faster or not, give none."""
    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    emulated = [replace(_row("none", 500.0, "fp8-dynamic"), emulated=True),
                replace(_row("ngram", 600.0, "fp8-dynamic"), emulated=True)]
    rows = with_speedups([_row("none", 50.0, "reference"), _row("ngram", 60.0, "reference"), *emulated])
    assert [(b.artifact_id, b.speculative) for b in best_configs(manifest, rows)] == [("reference", "ngram")]
    assert {b.artifact_id for b in best_configs(manifest, [replace(r, emulated=False) for r in rows])} == {
        "reference", "fp8-dynamic"}
