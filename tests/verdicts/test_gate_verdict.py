"""One gate verdict: eval's judge, the release decision and the cards give the same verdict on the same records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hfrelease.cards.inputs import read_inputs
from hfrelease.cards.measurements import measure_family
from hfrelease.evaluation.judging import judge
from hfrelease.evaluation.plan import installed_harness, plan_eval
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest
from hfrelease.publish.decision import decide_gates
from hfrelease.verdicts.verdict import gate_verdict

pytestmark = pytest.mark.unit

GOOD = [1.0] * 9 + [0.0]  # 0.9
WORSE = [1.0] * 4 + [0.0] * 6  # 0.4: far outside a 0.05 margin
LOW = [1.0] * 3 + [0.0] * 7  # 0.3: under the json gate's floor of 0.5
KEY = "0" * 64


def _record(key: str, artifact: str, sha: str, gate: str, metric: str, scores: list[float], *,
            status: str = "ok") -> LedgerRecord:  # fmt: skip
    samples = tuple(Sample(doc_id=str(i), score=s, truncated=False, empty=False) for i, s in enumerate(scores))
    harness = {k: v for k, v in installed_harness().items() if v is not None}
    return LedgerRecord(
        kind="gate", family="fixture", artifact_id=artifact, artifact_hash=sha, artifact_files=(), subject_id=gate,
        harness="lm-eval", task="fixture_task", task_hash=None, mode="non-thinking", n=len(scores), seed=1234,
        generation={}, metrics={metric: Metric(value=float(np.mean(scores)))}, samples=samples, truncated=0, empty=0,
        serve=ServeRecord(argv=("vllm",), env={}, display="vllm"), versions=harness, hardware={},
        started_at="2026-11-29T12:00:00Z", duration_s=1.0, input_key=key, extra={"value": float(np.mean(scores))},
        status=status, void_reason="cut off" if status == "void" else None,  # type: ignore[arg-type]
    )


def _write(family: Manifest, ledger: Ledger, scores: dict[tuple[str, str], list[float]]) -> None:
    plan = plan_eval(family, ledger=ledger, hash_cache=None)
    for job in plan.servers:
        assert job.content is not None
        for g in job.gates:
            ledger.write(_record(g.input_key, job.artifact.id, job.content.sha256, g.gate.id, g.gate.metric,
                                 scores[(job.artifact.id, g.gate.id)]))


CASES = {
    "reference below its floor": (
        {("ref", "arith"): GOOD, ("ref", "json"): LOW, ("fp8", "arith"): GOOD, ("fp8", "json"): LOW},
        {("ref", "arith"): "reference", ("ref", "json"): "fail", ("fp8", "arith"): "pass", ("fp8", "json"): "fail"},
    ),
    "quant worse than the reference": (
        {("ref", "arith"): GOOD, ("ref", "json"): GOOD, ("fp8", "arith"): WORSE, ("fp8", "json"): GOOD},
        {("ref", "arith"): "reference", ("ref", "json"): "reference", ("fp8", "arith"): "fail",
         ("fp8", "json"): "pass"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_runner_release_and_cards_agree(case: str, family: Manifest, tmp_path: Path) -> None:
    """The same records judged by `judge`, `decide_gates` and the cards give one verdict per (artifact, gate)."""
    scores, expected = CASES[case]
    ledger = Ledger(family.ledger_dir)
    _write(family, ledger, scores)

    runner = judge(plan_eval(family, ledger=ledger, hash_cache=None), ledger=ledger, measured={}, hash_cache=None)
    decision = decide_gates(family, ledger=ledger, hash_cache=None, gates=["arith", "json"])
    cards = measure_family(read_inputs(family)).gates

    assert {(r.artifact_id, r.gate_id): r.verdict for r in runner} == expected
    assert {(r.artifact_id, r.gate_id): r.verdict for r in decision.rows} == expected
    assert {key: result.verdict for key, result in cards.items()} == expected
    # The reasons agree too, and the release stops exactly on the failures (the reference's are allowed:
    # it is not published).
    assert {(r.artifact_id, r.gate_id): r.reason for r in runner} == {k: v.reason for k, v in cards.items()}
    failed = {k for k, v in expected.items() if v == "fail"}
    assert {(p.artifact, p.gate) for p in (*decision.blocking, *decision.allowed)} == failed
    assert {p.artifact for p in decision.allowed} <= {"ref"}


def test_void_and_missing_reference(family: Manifest) -> None:
    """A void record is void with its reason; with no valid reference record the verdict is no-reference."""
    gate = family.gate[0]
    ok = _record(KEY, "fp8", KEY, gate.id, gate.metric, GOOD)
    void = _record(KEY, "fp8", KEY, gate.id, gate.metric, GOOD, status="void")
    ref_void = _record(KEY, "ref", KEY, gate.id, gate.metric, GOOD, status="void")

    def no_samples(record: LedgerRecord) -> tuple[Sample, ...]:
        raise AssertionError("nothing to compare")

    assert gate_verdict(gate, void, reference_id="ref", reference=None, samples=no_samples).reason == "cut off"
    for reference in (None, ref_void):
        judged = gate_verdict(gate, ok, reference_id="ref", reference=reference, samples=no_samples)
        assert judged.verdict == "no-reference" and "evaluate ref" in judged.reason
    assert gate_verdict(gate, ref_void, reference_id="ref", reference=None, samples=no_samples).verdict == "void"
