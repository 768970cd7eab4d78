"""Speedups, the best config per workload, and draft artifacts' gates, from speed rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.manifest import Manifest, load_manifest
from hfrelease.speed.noise import SessionNoise
from hfrelease.speed.result import SpeedRow
from hfrelease.speed.verdict import best_configs, draft_checks, with_speedups

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# A host's session noise (`hfrelease.speed.noise`): 2 % per session over 10 degrees of freedom (t 2.23).
NOISE = SessionNoise(sigma=0.02, df=10, groups=("reference/chat [none] c1 x11",))


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
         artifact: str = "reference", acceptance: float | None = None, status: str = "ok",
         input_len: int | None = None) -> SpeedRow:
    metrics = {"output_throughput": tps}
    if acceptance is not None:
        metrics["spec_acceptance_rate"] = acceptance
    return SpeedRow(artifact_id=artifact, workload_id=workload, speculative=spec, concurrency=concurrency,
                    draft_id="draft" if spec == "draft" else None, origin="measured",
                    status=status, metrics=metrics,  # type: ignore[arg-type]
                    spread={"output_throughput": [tps - spread, tps + spread]}, input_len=input_len)


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
    """ngram wins longdoc, the draft wins chat; a clear win only beyond session noise (and its repeats apart)."""
    rows = with_speedups([
        _row("chat", "none", 50.0), _row("chat", "ngram", 45.0), _row("chat", "draft", 80.0),
        _row("longdoc", "none", 50.0), _row("longdoc", "ngram", 90.0, spread=5), _row("longdoc", "draft", 86.0),
        _row("load", "none", 200.0, concurrency=8, artifact="fp8-dynamic"),
    ])
    best = {(b.artifact_id, b.workload_id): b for b in best_configs(demo, rows, NOISE)}
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


def test_no_draft_gate_without_a_batch1_point(demo: Manifest) -> None:
    """The draft gates start from a batch-1 point served with the draft (its acceptance is measured there): points
    at other concurrencies alone judge nothing."""
    rows = with_speedups([_row("chat", "none", 50.0, concurrency=4), _row("chat", "draft", 40.0, concurrency=4,
                                                                           acceptance=0.1)])
    assert draft_checks(demo, rows) == []


def test_a_draft_that_wins_at_batch1_but_loses_at_other_points_fails_its_speedup_gate(demo: Manifest) -> None:
    """Issue 24: 1.6x at batch 1 passes min_speedup 1.1 on that one point, but the same workload's context sweep
    measured 0.50x at 128 tokens and concurrency 4 measured 0.80x: the speedup gate is judged over every point,
    fails, names each losing point and takes the worst as its value."""
    rows = with_speedups([
        _row("chat", "none", 50.0), _row("chat", "draft", 80.0, acceptance=0.9),
        _row("chat", "none", 75.0, input_len=128), _row("chat", "draft", 37.5, input_len=128, acceptance=0.1),
        _row("chat", "none", 60.0, input_len=256), _row("chat", "draft", 90.0, input_len=256, acceptance=0.9),
        _row("chat", "none", 100.0, concurrency=4), _row("chat", "draft", 80.0, concurrency=4, acceptance=0.9),
    ])
    (speedup,) = [c for c in draft_checks(demo, rows, NOISE) if c.check == "speedup"]
    assert speedup.verdict == "fail" and speedup.value == 0.5
    assert "input 128 tokens 0.50x" in speedup.reason and "concurrency 4 0.80x" in speedup.reason
    assert "batch-1 speedup" not in speedup.reason and "input 256" not in speedup.reason  # those pass
    winning = [r for r in rows if r.input_len != 128 and r.concurrency == 1]
    (alone,) = [c for c in draft_checks(demo, winning, NOISE) if c.check == "speedup"]
    assert alone.verdict == "pass" and alone.value == 1.5  # batch 1 (1.60x) and input 256 (1.50x): the worst


def test_the_speedup_gate_must_clear_the_floor_beyond_session_noise(demo: Manifest) -> None:
    """1.20x over a floor of 1.1x passes on the point's value, but not beyond a session noise of 10 % (df 4: the
    interval's lower bound is 1.20 * exp(-2.776 * 0.1 * sqrt 2) = 0.81x); without a measured noise it passes on
    the value and says the noise is unmeasured."""
    rows = with_speedups([_row("chat", "none", 50.0), _row("chat", "draft", 60.0, acceptance=0.9)])
    noisy = SessionNoise(sigma=0.1, df=4, groups=("a", "b", "c", "d"))
    (judged,) = [c for c in draft_checks(demo, rows, noisy) if c.check == "speedup"]
    assert judged.verdict == "fail"
    assert "batch-1 speedup 1.20x (95 % from 0.81x, between sessions) < 1.1x" in judged.reason
    (unmeasured,) = [c for c in draft_checks(demo, rows) if c.check == "speedup"]
    assert unmeasured.verdict == "pass" and "session noise unmeasured" in unmeasured.reason


def test_the_acceptance_gate_judges_the_lower_bound_over_prompts(demo: Manifest) -> None:
    """Greedy repeats give identical counters, so the prompt is what varies: 0.66 over a floor of 0.5 passes on its
    value, but a 95 % interval over prompts of 0.45-0.80 does not clear the floor; one without a per-request record
    passes on its value and says it was not resampled."""
    from dataclasses import replace

    rows = with_speedups([_row("chat", "none", 50.0), _row("chat", "draft", 80.0, acceptance=0.66)])
    wide = [replace(r, acceptance_intervals={"spec_acceptance_rate": [0.45, 0.80]}) if r.speculative == "draft"
            else r for r in rows]
    (judged,) = [c for c in draft_checks(demo, wide) if c.check == "acceptance"]
    assert judged.verdict == "fail"
    assert (judged.judged, judged.judged_over) == (0.45, "prompts")
    assert "95 % over prompts 0.450-0.800: its lower bound < 0.5" in judged.reason
    narrow = [replace(r, acceptance_intervals={"spec_acceptance_rate": [0.58, 0.72]}) if r.speculative == "draft"
              else r for r in rows]
    (passed,) = [c for c in draft_checks(demo, narrow) if c.check == "acceptance"]
    assert passed.verdict == "pass" and passed.judged == 0.58
    (value,) = [c for c in draft_checks(demo, rows) if c.check == "acceptance"]
    assert value.verdict == "pass" and value.judged is None and "no per-request record" in value.reason


def test_the_speedup_gate_names_the_point_it_was_judged_at(demo: Manifest) -> None:
    """The gate's figure is its lowest point: a draft winning at batch 1 and losing at input 512 tokens is judged
    at input 512 tokens, the figure every card shows beside the batch-1 speedup."""
    rows = with_speedups([
        _row("chat", "none", 50.0), _row("chat", "draft", 80.0, acceptance=0.9),
        _row("chat", "none", 40.0, input_len=512), _row("chat", "draft", 20.0, input_len=512),
    ])
    (judged,) = [c for c in draft_checks(demo, rows, NOISE) if c.check == "speedup"]
    assert judged.verdict == "fail" and judged.judged_at == "input 512 tokens" and judged.judged_over == "sessions"
    assert judged.judged is not None and judged.judged < 0.5
