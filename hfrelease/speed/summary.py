"""Repeats of one workload point folded into what a ledger record holds: medians, spreads, acceptance.

Throughput and latencies are the median over repeats, with [min, max] as the spread. Speculative
counters are totals over the repeats and the acceptance figures are computed from those totals (a
pooled ratio: a repeat with more drafts weighs more, and the record's rate is exactly
accepted / draft_tokens of its own counters); their per-repeat spread is kept too.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hfrelease.speed.bench import BenchResult
from hfrelease.speed.metrics import SpecCounters, acceptance_metrics


@dataclass(frozen=True, kw_only=True)
class Repeat:
    """One measured run of a point: the benchmark's result and the server's counter delta around it."""

    result: BenchResult
    spec: SpecCounters


@dataclass(frozen=True, kw_only=True)
class PointSummary:
    metrics: dict[str, float]
    spread: dict[str, list[float]]
    failed: int
    completed: int
    bench_seconds: float
    output_tokens: int = 0  # generated over every repeat's completed requests (vllm bench's total_output_tokens)


def median_and_spread(values: Sequence[float]) -> tuple[float, list[float]]:
    """The median of `values` and their [min, max]."""
    if not values:
        raise ValueError("no values")
    return float(statistics.median(values)), [float(min(values)), float(max(values))]


def summarise(repeats: Sequence[Repeat]) -> PointSummary:
    """Medians and spreads of the repeats' metrics; acceptance from the pooled counters."""
    per_repeat: list[Mapping[str, float]] = [r.result.metrics() for r in repeats]
    names = sorted(set().union(*per_repeat)) if per_repeat else []
    metrics: dict[str, float] = {}
    spread: dict[str, list[float]] = {}
    for name in names:
        values = [m[name] for m in per_repeat if name in m]
        metrics[name], spread[name] = median_and_spread(values)
    pooled = SpecCounters()
    for repeat in repeats:
        pooled = pooled + repeat.spec
    metrics.update(acceptance_metrics(pooled))
    rates = [acceptance_metrics(r.spec).get("spec_acceptance_rate") for r in repeats]
    known = [r for r in rates if r is not None]
    if known:
        spread["spec_acceptance_rate"] = median_and_spread(known)[1]
    return PointSummary(
        metrics={k: round(v, 6) for k, v in metrics.items()},
        spread={k: [round(v, 6) for v in pair] for k, pair in spread.items()},
        failed=sum(r.result.failed for r in repeats),
        completed=sum(r.result.completed for r in repeats),
        bench_seconds=sum(r.result.duration_s for r in repeats),
        output_tokens=sum(r.result.total_output_tokens for r in repeats),
    )
