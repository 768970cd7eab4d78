"""Planning an eval (what runs, what is recorded) and judging recorded results against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from hfrelease.errors import ConfigError, ExitCode
from hfrelease.evaluation.judging import judge
from hfrelease.evaluation.plan import plan_eval
from hfrelease.evaluation.runner import EvalReport
from hfrelease.files.hashing import HashCache
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest

pytestmark = pytest.mark.unit


def _record(job_key: str, artifact: str, artifact_hash: str, gate: str, scores: list[float], *,
            status: str = "ok", started_at: str = "2026-11-29T12:00:00Z") -> LedgerRecord:
    samples = tuple(Sample(doc_id=str(i), score=s, truncated=False, empty=False) for i, s in enumerate(scores))
    return LedgerRecord(
        kind="gate", family="fixture", artifact_id=artifact, artifact_hash=artifact_hash, artifact_files=(),
        subject_id=gate, harness="lm-eval", task="fixture_task", task_hash=None, mode="non-thinking",
        n=len(scores), seed=1234, generation={}, metrics={"exact_match,none": Metric(value=float(np.mean(scores)))},
        samples=samples, truncated=0, empty=0, serve=ServeRecord(argv=("vllm",), env={}, display="vllm"),
        versions={}, hardware={}, started_at=started_at, duration_s=1.0, input_key=job_key,
        extra={"value": float(np.mean(scores))}, status=status,  # type: ignore[arg-type]
        void_reason="cut off" if status == "void" else None,
    )


def test_plan_serves_each_non_draft_artifact_once(family: Manifest, tmp_path: Path) -> None:
    """One server job per reference/quant artifact; every gate of it on that server; drafts not served."""
    plan = plan_eval(family, ledger=Ledger(tmp_path / "results"), hash_cache=HashCache(tmp_path / "h.json"))
    assert [s.artifact.id for s in plan.servers] == ["ref", "fp8"]
    assert [g.gate.id for g in plan.servers[0].gates] == ["arith", "json"]
    assert plan.pending == 4
    assert all(len(g.input_key) == 64 for s in plan.servers for g in s.gates)


def test_recorded_gate_is_not_pending(family: Manifest, tmp_path: Path) -> None:
    """A gate recorded under the same input key is not re-run; --force re-runs it."""
    ledger = Ledger(tmp_path / "results")
    cache = HashCache(tmp_path / "h.json")
    plan = plan_eval(family, ledger=ledger, hash_cache=cache)
    job = plan.servers[0].gates[0]
    content = plan.servers[0].content
    assert content is not None
    ledger.write(_record(job.input_key, "ref", content.sha256, "arith", [1, 0, 1]))
    again = plan_eval(family, ledger=ledger, hash_cache=cache)
    assert not again.servers[0].gates[0].pending
    assert again.pending == 3
    forced = plan_eval(family, ledger=ledger, hash_cache=cache, force=True)
    assert forced.pending == 4


def test_input_key_follows_measurement_not_judgement(fixture_family: Path, tmp_path: Path) -> None:
    """Changing a gate's margin re-judges (same key); changing its budget re-measures (new key)."""
    for name in ("ref", "fp8", "draft"):
        save_file({"w": np.ones((2, 2), dtype="float32")}, str(fixture_family / "checkpoints" / name / "x.safetensors"))

    def key_for(text: str) -> str:
        (fixture_family / "release.toml").write_text(text)
        plan = plan_eval(load_manifest(fixture_family), ledger=Ledger(tmp_path / "r"), hash_cache=None)
        return plan.servers[0].gates[0].input_key

    original = (fixture_family / "release.toml").read_text()
    base = key_for(original)
    assert key_for(original.replace("margin = 0.05", "margin = 0.2", 1)) == base
    assert key_for(original.replace("max_tokens = 16", "max_tokens = 32", 1)) != base


def test_weights_change_the_key(family: Manifest, tmp_path: Path) -> None:
    """New weights for an artifact make its recorded results stale."""
    ledger = Ledger(tmp_path / "results")
    before = plan_eval(family, ledger=ledger, hash_cache=None).servers[0].gates[0].input_key
    save_file({"w": np.zeros((4, 4), dtype="float32")}, str(family.root / "checkpoints" / "ref" / "model.safetensors"))
    after = plan_eval(family, ledger=ledger, hash_cache=None).servers[0].gates[0].input_key
    assert before != after


def test_unknown_selection(family: Manifest, tmp_path: Path) -> None:
    """--artifact/--gate naming nothing is a config error listing what exists."""
    with pytest.raises(ConfigError) as info:
        plan_eval(family, ledger=Ledger(tmp_path), hash_cache=None, artifacts=["nope"], gates=["zzz"])
    assert {p.location for p in info.value.problems} == {"--artifact", "--gate"}


def test_judge_pass_fail_void(family: Manifest, tmp_path: Path) -> None:
    """Paired against the reference: an equal quant passes, a worse one fails, a void stays void."""
    ledger = Ledger(tmp_path / "results")
    plan = plan_eval(family, ledger=ledger, hash_cache=None, gates=["arith"])
    ref_job, fp8_job = plan.servers[0], plan.servers[1]
    assert ref_job.content and fp8_job.content
    good = [1.0] * 90 + [0.0] * 10
    ledger.write(_record(ref_job.gates[0].input_key, "ref", ref_job.content.sha256, "arith", good))
    ledger.write(_record(fp8_job.gates[0].input_key, "fp8", fp8_job.content.sha256, "arith", good))
    rows = judge(plan_eval(family, ledger=ledger, hash_cache=None, gates=["arith"]), ledger=ledger, measured={},
                 hash_cache=None)
    assert [(r.artifact_id, r.verdict) for r in rows] == [("ref", "reference"), ("fp8", "pass")]
    assert rows[1].comparison is not None and rows[1].comparison.delta == 0

    bad = [1.0] * 50 + [0.0] * 50
    ledger.write(_record(fp8_job.gates[0].input_key, "fp8", fp8_job.content.sha256, "arith", bad,
                         started_at="2026-11-29T13:00:00Z"))
    rows = judge(plan_eval(family, ledger=ledger, hash_cache=None, gates=["arith"]), ledger=ledger, measured={},
                 hash_cache=None)
    assert rows[1].verdict == "fail"
    assert rows[1].comparison is not None and rows[1].comparison.ci_high < 0
    report = EvalReport(rows=tuple(rows), servers_started=0, requests_sent=0, run_dir=tmp_path)
    assert report.exit_code == ExitCode.GATE_FAILED

    ledger.write(_record(fp8_job.gates[0].input_key, "fp8", fp8_job.content.sha256, "arith", bad, status="void",
                         started_at="2026-11-29T14:00:00Z"))
    rows = judge(plan_eval(family, ledger=ledger, hash_cache=None, gates=["arith"]), ledger=ledger,
                 measured={("fp8", "arith", 1234): ledger.records(artifact_id="fp8")[-1]}, hash_cache=None)
    assert rows[1].verdict == "void"
    report = EvalReport(rows=tuple(rows), servers_started=0, requests_sent=0, run_dir=tmp_path)
    assert report.exit_code == ExitCode.MEASUREMENT_FAILED
