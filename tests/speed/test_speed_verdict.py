"""Speedups, the best config per workload, and draft artifacts' gates, from speed rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.manifest import Manifest, load_manifest
from hfrelease.speed.result import SpeedRow
from hfrelease.speed.verdict import best_configs, draft_checks, with_speedups

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo() -> Manifest:
    """The demo family's manifest (workloads chat/longdoc/load; configs ngram and draft)."""
    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    draft = manifest.artifact_by_id("draft")
    assert draft.draft is not None
    # Without its matrix: a draft x target point is reported on the draft's card, never target-checked.
    thresholds = draft.draft.model_copy(update={"min_acceptance_rate": 0.5, "min_speedup": 1.1, "matrix": False})
    artifacts = [a.model_copy(update={"draft": thresholds}) if a.id == "draft" else a for a in manifest.artifact]
    return manifest.model_copy(update={"artifact": artifacts})


def _row(workload: str, spec: str, tps: float, *, spread: float = 1.0, concurrency: int = 1,
         artifact: str = "reference", acceptance: float | None = None, status: str = "ok") -> SpeedRow:
    metrics = {"output_throughput": tps}
    if acceptance is not None:
        metrics["spec_acceptance_rate"] = acceptance
    return SpeedRow(artifact_id=artifact, workload_id=workload, speculative=spec, concurrency=concurrency,
                    draft_id="draft" if spec == "draft" else None, origin="measured",
                    status=status, metrics=metrics,  # type: ignore[arg-type]
                    spread={"output_throughput": [tps - spread, tps + spread]})


def test_speedup_is_against_the_same_point_without_speculation() -> None:
    """Each config's speedup divides by the none row of the same artifact, workload and concurrency."""
    rows = with_speedups([_row("chat", "none", 50.0), _row("chat", "draft", 75.0), _row("chat", "ngram", 40.0),
                          _row("chat", "none", 100.0, concurrency=4), _row("longdoc", "ngram", 60.0)])
    speedups = {(r.workload_id, r.speculative, r.concurrency): r.speedup for r in rows}
    assert speedups[("chat", "draft", 1)] == 1.5
    assert speedups[("chat", "ngram", 1)] == 0.8
    assert speedups[("chat", "none", 1)] == 1.0
    assert speedups[("longdoc", "ngram", 1)] is None  # no baseline measured


def test_void_rows_get_no_speedup_and_are_no_baseline() -> None:
    """A void point neither gets a speedup nor serves as the baseline of others."""
    rows = with_speedups([_row("chat", "none", 50.0, status="void"), _row("chat", "draft", 75.0)])
    assert all(r.speedup is None for r in rows)


def test_best_config_per_workload(demo: Manifest) -> None:
    """ngram wins longdoc, the draft wins chat; a clear win only when spreads do not overlap."""
    rows = with_speedups([
        _row("chat", "none", 50.0), _row("chat", "ngram", 45.0), _row("chat", "draft", 80.0),
        _row("longdoc", "none", 50.0), _row("longdoc", "ngram", 90.0, spread=5), _row("longdoc", "draft", 86.0),
        _row("load", "none", 200.0, concurrency=8, artifact="fp8-dynamic"),
    ])
    best = {(b.artifact_id, b.workload_id): b for b in best_configs(demo, rows)}
    assert best[("reference", "chat")].speculative == "draft" and best[("reference", "chat")].clear
    assert best[("reference", "chat")].speedup == 1.6
    assert best[("reference", "longdoc")].speculative == "ngram"
    assert not best[("reference", "longdoc")].clear and best[("reference", "longdoc")].runner_up == "draft"
    assert ("fp8-dynamic", "load") not in best  # no batch-1 point


def test_best_config_tie_goes_to_the_config_listed_first(demo: Manifest) -> None:
    """Equal throughput: the workload's first-listed config wins, as cards choose."""
    rows = [_row("chat", "draft", 50.0), _row("chat", "none", 50.0)]
    assert best_configs(demo, rows)[0].speculative == "none"


def test_draft_gates_pass_and_fail(demo: Manifest) -> None:
    """Acceptance and speedup against the draft's thresholds; each failure says by how much."""
    rows = with_speedups([
        _row("chat", "none", 50.0), _row("chat", "draft", 80.0, acceptance=0.95),
        _row("longdoc", "none", 50.0), _row("longdoc", "draft", 52.0, acceptance=0.4),
    ])
    checks = {(c.workload_id, c.check): c for c in draft_checks(demo, rows)}
    assert checks[("chat", "acceptance")].verdict == "pass"
    assert checks[("chat", "speedup")].verdict == "pass"
    assert checks[("chat", "target")].verdict == "pass"
    assert checks[("longdoc", "acceptance")].verdict == "fail"
    assert "0.400 < 0.5" in checks[("longdoc", "acceptance")].reason
    assert checks[("longdoc", "speedup")].verdict == "fail"
    assert "1.04x < 1.1x" in checks[("longdoc", "speedup")].reason


def test_draft_served_with_another_artifact_fails_the_target_check(demo: Manifest) -> None:
    """The draft was trained against the reference: serving it with the FP8 quant is reported."""
    rows = with_speedups([_row("chat", "none", 50.0, artifact="fp8-dynamic"),
                          _row("chat", "draft", 70.0, artifact="fp8-dynamic", acceptance=0.9)])
    target = next(c for c in draft_checks(demo, rows) if c.check == "target")
    assert target.verdict == "fail" and "trained against reference" in target.reason


def test_draft_gate_without_baseline_fails_with_a_reason(demo: Manifest) -> None:
    """No batch-1 run without speculation: the speedup gate cannot pass and says why."""
    checks = draft_checks(demo, with_speedups([_row("chat", "draft", 70.0, acceptance=0.9)]))
    speedup = next(c for c in checks if c.check == "speedup")
    assert speedup.verdict == "fail" and "no batch-1 measurement without speculation" in speedup.reason


def test_sweep_points_are_not_draft_gated(demo: Manifest) -> None:
    """Draft gates judge batch-1 points only."""
    rows = with_speedups([_row("chat", "none", 50.0, concurrency=4), _row("chat", "draft", 40.0, concurrency=4,
                                                                           acceptance=0.1)])
    assert draft_checks(demo, rows) == []
