"""Judging: each artifact's gate results against the reference's, on the same samples, as the gate table's rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hfrelease.errors import HfreleaseError
from hfrelease.evaluation.plan import (
    EvalPlan,
    GateJob,
    find_gate_record,
    manifest_gate,
)
from hfrelease.files.hashing import HashCache
from hfrelease.files.sources import artifact_content
from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Gate, Manifest
from hfrelease.serving.command import build_serve_command
from hfrelease.serving.kernels import isa_name
from hfrelease.verdicts.comparison import Comparison
from hfrelease.verdicts.verdict import Verdict, gate_verdict, seeded_value

# A gate run measured in this process: (artifact id, gate id, seed): a gate with `seeds` has one run per seed.
RunKey = tuple[str, str, int]


@dataclass(frozen=True, kw_only=True)
class GateRow:
    """One line of the gate table: an artifact and a gate."""

    artifact_id: str
    gate_id: str
    label: str
    origin: Literal["measured", "recorded"]
    status: Literal["ok", "void"]
    value: float
    stderr: float | None
    n: int
    truncated: int
    empty: int
    mode: str
    verdict: Verdict
    reason: str
    comparison: Comparison | None = None
    checks: tuple[tuple[str, Comparison], ...] = ()  # every check judged (accuracy, truncation, kl, flip_rate)
    # Runs merged (a gate with `seeds`): `value` is their mean, `n` the items, `truncated` / `empty` over all runs
    seeds: int = 1
    # The path that measured it ("AVX2, vLLM _C_AVX2 kernels"; hfrelease.serving.kernels); None when unrecorded.
    served_on: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {k: v for k, v in self.__dict__.items() if k not in ("comparison", "checks")}
        if self.comparison is not None:
            data["comparison"] = dict(self.comparison.__dict__)
        if self.checks:
            data["checks"] = {name: dict(c.__dict__) for name, c in self.checks}
        return data



def judge(
    plan: EvalPlan,
    *,
    ledger: Ledger,
    measured: Mapping[RunKey, LedgerRecord],
    hash_cache: HashCache | None,
    any_harness: bool = False,
) -> list[GateRow]:
    """Compare each artifact's gate result with the reference's, on the same samples.

    A gate with `seeds` is one row over all of its runs, judged once every seed's run is recorded (on the
    artifact and the reference; `hfrelease.verdicts.seeds`): a void run voids the row. `any_harness`: the
    reference's record may have been made with another vLLM / lm-eval than the one installed here (judging
    where no vLLM is installed; see `find_gate_record`).
    """
    manifest = plan.manifest
    reference = manifest.reference
    rows: list[GateRow] = []
    reference_records: dict[tuple[str, int], LedgerRecord | None] = {}
    for job in plan.servers:
        runs: dict[str, list[GateJob]] = {}
        for gate_job in job.gates:
            runs.setdefault(gate_job.gate.id, []).append(gate_job)
        for gate_id, gate_jobs in runs.items():
            gate = manifest_gate(manifest, gate_id)
            found = [measured.get((job.artifact.id, g.gate.id, g.gate.seed)) or g.recorded for g in gate_jobs]
            records = [r for r in found if r is not None]
            if len(records) != len(found):
                continue  # a seed's run is not recorded: nothing to judge yet
            origin: Literal["measured", "recorded"] = (
                "measured" if any((job.artifact.id, gate_id, g.gate.seed) in measured for g in gate_jobs)
                else "recorded")
            refs: list[LedgerRecord] | None = None
            if job.artifact.id != reference.id and all(r.status == "ok" for r in records):
                found_refs: list[LedgerRecord | None] = []
                for g in gate_jobs:
                    if (gate_id, g.gate.seed) not in reference_records:
                        reference_records[(gate_id, g.gate.seed)] = measured.get(
                            (reference.id, gate_id, g.gate.seed)) or reference_record(
                            manifest, g.gate, ledger=ledger, hash_cache=hash_cache, any_harness=any_harness)
                    found_refs.append(reference_records[(gate_id, g.gate.seed)])
                refs = [r for r in found_refs if r is not None] if None not in found_refs else None
            judged = gate_verdict(gate, records, reference_id=reference.id, reference=refs,
                                  samples=ledger.load_samples)
            value = seeded_value(gate, records, [ledger.load_samples(r) if len(records) > 1 and r.status == "ok"
                                                 else () for r in records])
            rows.append(GateRow(
                artifact_id=job.artifact.id, gate_id=gate.id, label=gate.label or gate.id, origin=origin,
                status="void" if any(r.status == "void" for r in records) else "ok",
                value=float("nan") if value.value is None else value.value, stderr=value.stderr, n=value.n,
                truncated=value.truncated, empty=value.empty, mode=gate.mode, verdict=judged.verdict,
                reason=judged.reason, comparison=judged.comparison, checks=judged.checks, seeds=value.seeds,
                served_on=served_on(records[0].hardware),
            ))
    return rows


# What a maintainer can do about a failing gate, by the check that failed: a verdict is only as good as the
# variation it has seen (prompts, items, the host's kernels), so the first two answers are about that.
_ADVICE = {
    "kl": ("if the interval is wide, score more prompts (the gate's prompt file) or longer continuations "
           "(max_tokens); if the quant passes on another ISA or GPU, measure on every path it will be served on "
           "and set max_kl / max_flip_rate from those figures with headroom; else the quant itself drifts: "
           "re-quantize (another scheme, or keep more layers unquantized with `ignore`)"),
    "accuracy": ("if the interval is wide, give the gate more items (a larger task, or no `limit`) or seeds; set "
                 "`margin` from measured spread, not a guess; else the artifact lost quality: a better quant or "
                 "checkpoint"),
    "truncation": "raise max_tokens if answers are cut; an artifact that loops more than its reference has drifted",
}
_ADVICE["flip_rate"] = _ADVICE["kl"]


def failure_advice(row: GateRow) -> str | None:
    """For a failing row, one line: where it was measured, and what to do about the check that failed."""
    if row.verdict != "fail":
        return None
    failed = next((name for name, c in row.checks if c.verdict == "fail"), None)
    where = f" on {row.served_on}" if row.served_on else ""
    advice = _ADVICE.get(failed or "", "")
    return f"{row.artifact_id} fails {row.label}{where}" + (f": {advice}" if advice else "")


def served_on(hardware: Mapping[str, Any]) -> str | None:
    """What a record's hardware says of the path that measured it: the GPUs, or the CPU's ISA and the vLLM
    kernel library its server loaded (int8/FP8 numerics differ between them)."""
    gpus = hardware.get("gpus")
    if isinstance(gpus, list) and gpus:
        return ", ".join(sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)}))
    isa, kernels = hardware.get("cpu_isa"), hardware.get("vllm_kernels")
    parts = [isa_name(isa),
             f"vLLM {'+'.join(map(str, kernels))} kernels" if isinstance(kernels, list) and kernels else ""]
    return ", ".join(p for p in parts if p) or None


def reference_record(
    manifest: Manifest, gate: Gate, *, ledger: Ledger, hash_cache: HashCache | None, any_harness: bool = False,
) -> LedgerRecord | None:
    """The reference's recorded result for `gate` under the current inputs (not a stale one).

    The reference is identified without downloading it (a Hub source from the Hub's listing), so a quant's
    eval job, which serves only the quant, still compares it with the reference.
    """
    reference = manifest.reference
    try:
        _, content = artifact_content(manifest, reference, download=False, cache=hash_cache)
    except HfreleaseError:
        return None
    public = build_serve_command(manifest, reference, model=reference.repo)
    return find_gate_record(manifest, gate, ledger=ledger, artifact_id=reference.id, content_sha256=content.sha256,
                            public=public, any_harness=any_harness)
