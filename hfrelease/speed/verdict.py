"""What the speed measurements decide: speedups, the best config per workload, and draft artifacts' gates.

Best config: per (artifact, workload), the config with the highest median batch-1 output tok/s (ties:
the config the workload lists first, as cards choose). It is a *clear* win when its throughput spread
does not overlap the runner-up's: with three repeats on a busy machine, overlapping spreads mean the
ranking may not survive a re-run, and the report says so instead of hiding it.

Draft gates (thresholds on `[artifact.draft]`): every batch-1 point served with the draft must have
its acceptance measured (the speculative counters of /metrics; a point without them fails, thresholds
or not: a draft whose acceptance was never measured is not released), reach `min_acceptance_rate`,
`min_acceptance_length` and `min_speedup` over no speculation on the same workload, and be served
with the artifact it was trained against (`target`): acceptance measured against another verifier
says little about the one the card names. The acceptance is the point's pooled rate; its reason quotes the
95 % interval over prompts when the point had a per-request pass. At temperature 0, `min_identical_outputs`
bounds the share of prompts whose output tokens equal no speculation's (losslessness, measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from hfrelease.manifest import Manifest
from hfrelease.speed.acceptance import IDENTICAL, RATE
from hfrelease.speed.result import SpeedRow

NONE = "none"


def with_speedups(rows: Sequence[SpeedRow]) -> list[SpeedRow]:
    """Rows with `speedup` set against the ok "none" row of the same artifact, workload and concurrency (and
    input length, for a context sweep's points)."""
    baselines = {(r.artifact_id, r.workload_id, r.concurrency, r.input_len): r for r in rows
                 if r.speculative == NONE and r.status == "ok"}
    result: list[SpeedRow] = []
    for row in rows:
        base = baselines.get((row.artifact_id, row.workload_id, row.concurrency, row.input_len))
        speedup = None
        if row.status == "ok" and base is not None and base.throughput > 0:
            speedup = round(row.throughput / base.throughput, 4)
        result.append(replace(row, speedup=speedup))
    return result


@dataclass(frozen=True, kw_only=True)
class BestConfig:
    artifact_id: str
    workload_id: str
    speculative: str
    throughput: float
    speedup: float | None
    clear: bool  # its spread does not overlap the runner-up's
    runner_up: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _overlaps(a: SpeedRow, b: SpeedRow) -> bool:
    sa = a.spread.get("output_throughput") or [a.throughput, a.throughput]
    sb = b.spread.get("output_throughput") or [b.throughput, b.throughput]
    return sa[0] <= sb[1] and sb[0] <= sa[1]


def best_configs(manifest: Manifest, rows: Sequence[SpeedRow]) -> list[BestConfig]:
    """The best batch-1 config of every (artifact, workload) with at least one ok batch-1 point."""
    order = {w.id: list(w.speculative) for w in manifest.workload}
    groups: dict[tuple[str, str], list[SpeedRow]] = {}
    for row in rows:
        if row.concurrency == 1 and row.status == "ok" and row.input_len is None:  # a sweep's points: not the workload
            groups.setdefault((row.artifact_id, row.workload_id), []).append(row)
    best: list[BestConfig] = []
    for (artifact_id, workload_id), candidates in groups.items():
        listed = order.get(workload_id, [])
        ranked = sorted(candidates, key=lambda r: (-r.throughput, listed.index(r.speculative)
                                                   if r.speculative in listed else len(listed)))
        top = ranked[0]
        runner_up = ranked[1] if len(ranked) > 1 else None
        best.append(BestConfig(
            artifact_id=artifact_id, workload_id=workload_id, speculative=top.speculative,
            throughput=top.throughput, speedup=top.speedup,
            clear=runner_up is None or not _overlaps(top, runner_up),
            runner_up=runner_up.speculative if runner_up else None,
        ))
    return best


@dataclass(frozen=True, kw_only=True)
class DraftCheck:
    draft_id: str
    check: Literal["acceptance", "acceptance-length", "speedup", "target", "identical-outputs"]
    artifact_id: str
    workload_id: str
    speculative: str
    value: float | None
    threshold: float | None
    verdict: Literal["pass", "fail"]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def draft_checks(manifest: Manifest, rows: Sequence[SpeedRow]) -> list[DraftCheck]:
    """The draft gates of every draft artifact that served in `rows` (batch-1, ok points)."""
    checks: list[DraftCheck] = []
    for row in rows:
        if row.draft_id is None or row.concurrency != 1 or row.status != "ok" or row.input_len is not None:
            continue
        draft = manifest.artifact_by_id(row.draft_id)
        if draft.draft is None:
            continue
        spec = draft.draft
        if spec.matrix and row.artifact_id != spec.target:
            continue  # a draft x target matrix point: reported on the draft's card, not a gate of the draft
        base = {"draft_id": draft.id, "artifact_id": row.artifact_id, "workload_id": row.workload_id,
                "speculative": row.speculative}
        on_target = row.artifact_id == spec.target
        checks.append(DraftCheck(
            **base, check="target", value=None, threshold=None, verdict="pass" if on_target else "fail",
            reason=f"served with its target {spec.target}" if on_target else
            f"trained against {spec.target} but served with {row.artifact_id}: measure it with its target",
        ))
        rate = row.acceptance
        if spec.min_acceptance_rate is not None:
            ok = rate is not None and rate >= spec.min_acceptance_rate
            checks.append(DraftCheck(
                **base, check="acceptance", value=rate, threshold=spec.min_acceptance_rate,
                verdict="pass" if ok else "fail",
                reason=("no acceptance counters were recorded" if rate is None else
                        f"acceptance {rate:.3f}{over_prompts(row)} {'>=' if ok else '<'} {spec.min_acceptance_rate:g}"),
            ))
        else:
            # No floor, but the acceptance must still be measured: it is what the card reports.
            checks.append(DraftCheck(
                **base, check="acceptance", value=rate, threshold=None, verdict="pass" if rate is not None else "fail",
                reason=("no acceptance counters were recorded" if rate is None else
                        f"acceptance {rate:.3f}{over_prompts(row)} measured (no minimum set)"),
            ))
        if spec.min_acceptance_length is not None:
            length = row.metrics.get("spec_mean_acceptance_length")
            ok = length is not None and length >= spec.min_acceptance_length
            checks.append(DraftCheck(
                **base, check="acceptance-length", value=length, threshold=spec.min_acceptance_length,
                verdict="pass" if ok else "fail",
                reason=("no acceptance counters were recorded" if length is None else
                        f"mean acceptance length {length:.2f} {'>=' if ok else '<'} {spec.min_acceptance_length:g}"),
            ))
        if spec.min_identical_outputs is not None and row.greedy:
            checks.append(identical_outputs_check(base, row, spec.min_identical_outputs))
        if spec.min_speedup is not None:
            speedup = row.speedup
            ok = speedup is not None and speedup >= spec.min_speedup
            checks.append(DraftCheck(
                **base, check="speedup", value=speedup, threshold=spec.min_speedup,
                verdict="pass" if ok else "fail",
                reason=(f"no batch-1 measurement without speculation on {row.workload_id} to compare with"
                        if speedup is None else
                        f"batch-1 speedup {speedup:.2f}x {'>=' if ok else '<'} {spec.min_speedup:g}x"),
            ))
    return checks


def over_prompts(row: SpeedRow) -> str:
    """" (95 % over prompts a-b)" when the row's acceptance has an interval resampled over prompts."""
    pair = row.acceptance_intervals.get(RATE)
    return f" (95 % over prompts {pair[0]:.3f}-{pair[1]:.3f})" if pair else ""


def identical_outputs_check(base: dict[str, Any], row: SpeedRow, bound: float) -> DraftCheck:
    """The losslessness gate: the share of the point's prompts whose output tokens equal no speculation's
    (measured at temperature 0 on the same vLLM build) must reach `bound`; unmeasured, it fails."""
    share = row.metrics.get(IDENTICAL)
    ok = share is not None and share >= bound
    return DraftCheck(
        **base, check="identical-outputs", value=share, threshold=bound, verdict="pass" if ok else "fail",
        reason=(f"outputs never compared with no speculation's at temperature 0 on {row.workload_id} (a batch-1 "
                "point of each, per-request pass, same vLLM version)" if share is None else
                f"{share:.0%} of prompts give no speculation's output tokens {'>=' if ok else '<'} {bound:.0%}"),
    )
