"""The verdict of one gate on one artifact against the reference: the one function eval, the release
decision and the cards all call (`gate_verdict`), so they never disagree.

`gate_verdict` takes one recorded result and decides, in this order:

- **void**: the record itself is void (cut-off answers, failed requests): its reason.
- **reference**: the reference's own result, unless the gate has a `floor` the reference misses: then
  **fail** (a reference below the floor means the gate cannot pass on this family at all).
- **no-reference**: no valid ("ok") reference record, or none sharing a sample with the artifact's.
- **pass** / **fail**: `judge_samples` below.

Every check is a paired bootstrap (`hfrelease.verdicts.comparison.paired_comparison`) over the samples
both records share, judged as non-inferiority with the check's own margin:

- **accuracy** (lm-eval and custom gates): the gate's metric, `margin` and `floor`.
- **truncation** (the same gates): the share of answers cut by the budget or empty (a thinking block never
  closed), lower is better, margin `truncation_margin`: a quant that loops more than its reference fails
  even when its accuracy holds.
- **kl** and **flip_rate** (fidelity gates): each prompt's mean per-token KL and top-1 flip rate against the
  reference's own scoring of the same tokens (0 by construction, see `hfrelease.evaluation.fidelity`),
  lower is better, margins `max_kl` / `max_flip_rate`: the upper bound of the mean's interval must stay
  within the threshold.

A gate run under several seeds (`seeds`) is judged on each item's mean over the seeds, an item and all of
its seeds being one resampling unit (`hfrelease.verdicts.seeds`).

The gate passes when every check passes; the reason is the first failing check's (else the headline's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from hfrelease.errors import MeasurementError
from hfrelease.ledger.record import LedgerRecord, Sample
from hfrelease.manifest import Gate
from hfrelease.verdicts.comparison import Comparison, paired_comparison
from hfrelease.verdicts.seeds import SeedSamples, item_means

Verdict = Literal["pass", "fail", "void", "reference", "no-reference"]


@dataclass(frozen=True, kw_only=True)
class Judgement:
    verdict: Literal["pass", "fail"]
    reason: str
    comparison: Comparison  # the headline check (accuracy, or a fidelity gate's KL when it has max_kl)
    checks: tuple[tuple[str, Comparison], ...]  # every check judged, by name


def _figure(sample: Sample, name: str) -> float:
    if name == "score":
        return sample.score
    if name == "cut":
        return 1.0 if sample.truncated or sample.empty else 0.0
    value = (sample.model_extra or {}).get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"sample {sample.doc_id!r} has no {name!r}")
    return float(value)


def _by_doc(runs: SeedSamples, name: str) -> dict[str, float]:
    # One run: each item's own figure; several seeds: each item's mean over them (`seeds.item_means`).
    return item_means(runs, lambda s: _figure(s, name))[0]


def _fidelity_reason(name: str, label: str, unit: str, limit: float, comparison: Comparison) -> str:
    # The comparison's delta is reference - artifact (lower is better), so the artifact's excess over the
    # reference's self-score is -delta and its upper bound is -ci_low.
    within = "within" if comparison.verdict == "pass" else "above"
    pct = f"{comparison.confidence:.0%}"
    return (f"{label} {comparison.artifact_mean:.4g}{unit} ({pct} CI {-comparison.ci_high:.4g} to "
            f"{-comparison.ci_low:.4g}) on {comparison.n_paired} prompts: the upper bound is {within} "
            f"{name} = {limit:g}")


def judge_samples(gate: Gate, artifact: Sequence[Sample], reference: Sequence[Sample]) -> Judgement:
    """Judge `artifact`'s samples against the `reference`'s for `gate` (one run each); raises MeasurementError
    when they share no sample (`paired_comparison`)."""
    return judge_seeds(gate, {gate.seed: artifact}, {gate.seed: reference})


def judge_seeds(gate: Gate, artifact: SeedSamples, reference: SeedSamples) -> Judgement:
    """Judge `gate` over its runs (per seed, that run's samples) on the artifact and the reference: each
    figure is an item's mean over the seeds, so the bootstrap resamples an item with all of its seeds
    (`hfrelease.verdicts.seeds`)."""
    checks: list[tuple[str, Comparison]] = []
    reasons: dict[str, str] = {}
    if gate.is_fidelity:
        for name, figure, limit, label, unit in (("max_kl", "score", gate.max_kl, "mean KL", " nats/token"),
                                                 ("max_flip_rate", "flip_rate", gate.max_flip_rate,
                                                  "top-1 flip rate", "")):
            if limit is None:
                continue
            comparison = paired_comparison(_by_doc(artifact, figure), _by_doc(reference, figure), margin=limit,
                                           higher_is_better=False, seed=gate.seed)
            check = name.removeprefix("max_")
            checks.append((check, comparison))
            reasons[check] = _fidelity_reason(name, label, unit, limit, comparison)
    else:
        accuracy = paired_comparison(_by_doc(artifact, "score"), _by_doc(reference, "score"), margin=gate.margin,
                                     higher_is_better=gate.higher_is_better, floor=gate.floor, seed=gate.seed,
                                     min_recovery=gate.min_recovery)
        checks.append(("accuracy", accuracy))
        reasons["accuracy"] = accuracy.reason
        cut = paired_comparison(_by_doc(artifact, "cut"), _by_doc(reference, "cut"), margin=gate.truncation_margin,
                                higher_is_better=False, seed=gate.seed)
        checks.append(("truncation", cut))
        excess = f"{-cut.ci_high:+.1%} to {-cut.ci_low:+.1%}"
        reasons["truncation"] = (
            f"cut-off or empty answers {cut.artifact_mean:.1%} against the reference's {cut.reference_mean:.1%} "
            f"({cut.confidence:.0%} CI of the excess {excess}): "
            + (f"an excess above truncation_margin = {gate.truncation_margin:g} is not ruled out"
               if cut.verdict == "fail" else f"within truncation_margin = {gate.truncation_margin:g}"))
    if not checks:
        raise ValueError(f"gate {gate.id!r} has no threshold to judge (max_kl or max_flip_rate)")
    failed = [name for name, c in checks if c.verdict == "fail"]
    headline = checks[0]
    chosen = failed[0] if failed else headline[0]
    verdict: Literal["pass", "fail"] = "fail" if failed else "pass"
    return Judgement(verdict=verdict, reason=reasons[chosen], comparison=headline[1], checks=tuple(checks))


@dataclass(frozen=True, kw_only=True)
class GateVerdict:
    """What `gate_verdict` decided about one recorded result: the verdict, its reason, and the comparison
    with the reference when there was one."""

    verdict: Verdict
    reason: str
    comparison: Comparison | None = None
    checks: tuple[tuple[str, Comparison], ...] = ()


def headline_value(gate: Gate, record: LedgerRecord) -> float | None:
    """The gate's headline number in `record`: the value the gate recorded, else its metric's (None: neither)."""
    metric = record.metrics.get(gate.metric)
    raw = record.extra.get("value", metric.value if metric else None)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    return float(raw)


def _reference_floor(gate: Gate, value: float | None) -> GateVerdict:
    if gate.floor is None:
        return GateVerdict(verdict="reference", reason="the reference")
    meets = value is not None and (value >= gate.floor if gate.higher_is_better else value <= gate.floor)
    if meets:
        return GateVerdict(verdict="reference", reason="the reference")
    side = "below the floor" if gate.higher_is_better else "above the ceiling"
    shown = "no value" if value is None else f"{value:.4f}"
    return GateVerdict(verdict="fail", reason=f"the reference's {shown} is {side} {gate.floor:g}")


Runs = LedgerRecord | Sequence[LedgerRecord]  # one record, or a gate with `seeds`: one per seed


def _runs(value: Runs) -> list[LedgerRecord]:
    return [value] if isinstance(value, LedgerRecord) else list(value)


def gate_verdict(
    gate: Gate,
    record: Runs,
    *,
    reference_id: str,
    reference: Runs | None,
    samples: Callable[[LedgerRecord], Sequence[Sample]],
) -> GateVerdict:
    """The verdict of `record` (a gate result of any artifact, the reference's included) under `gate`.

    `record`: one record, or for a gate with `seeds` the record of each seed (judged together, see
    `judge_seeds`; a void run voids the gate, naming its seed). `reference`: the reference's record(s) to
    compare with (ignored when `record` is the reference's own); `samples`: how the caller reads a record's
    per-sample outcomes (the ledger's samples file, or those a card's inputs already hold).
    """
    records = _runs(record)
    void = next((r for r in records if r.status == "void"), None)
    if void is not None:
        reason = void.void_reason or "void"
        return GateVerdict(verdict="void", reason=f"seed {void.seed}: {reason}" if len(records) > 1 else reason)
    if records[0].artifact_id == reference_id:
        return _reference_floor(gate, seeded_value(gate, records, [() for _ in records]).value
                                if len(records) > 1 else headline_value(gate, records[0]))
    references = _runs(reference) if reference is not None else []
    if not references or any(r.status != "ok" for r in references):
        return GateVerdict(verdict="no-reference",
                           reason=f"no valid reference result for {gate.id}: evaluate {reference_id}")
    try:
        judged = judge_seeds(gate, {i: samples(r) for i, r in enumerate(records)},
                             {i: samples(r) for i, r in enumerate(references)})
    except MeasurementError as exc:
        return GateVerdict(verdict="no-reference", reason=exc.message)
    return GateVerdict(verdict=judged.verdict, reason=judged.reason, comparison=judged.comparison,
                       checks=judged.checks)


@dataclass(frozen=True, kw_only=True)
class SeededValue:
    """A gate's value over its runs: the mean of the runs' values, and its item-level standard error."""

    value: float | None  # None: a run has no value for the gate's metric
    stderr: float | None
    n: int  # items per run (every run has the same items when the task selection is fixed)
    seeds: int
    truncated: int  # over all runs' answers
    empty: int


def seeded_value(gate: Gate, records: Sequence[LedgerRecord], samples: Sequence[Sequence[Sample]]) -> SeededValue:
    """The value over the runs of one gate (one record per seed, with its samples; `()` when only the value
    is wanted). One run: its own value and stderr, as the harness reported them. Several: the mean of the
    runs' values and the standard error of the mean of the items' seed-means (items are the unit, as in the
    verdict)."""
    import math

    values = [headline_value(gate, r) for r in records]
    if len(records) == 1:
        metric = records[0].metrics.get(gate.metric)
        return SeededValue(value=values[0], stderr=metric.stderr if metric else None, n=records[0].n, seeds=1,
                           truncated=records[0].truncated, empty=records[0].empty)
    known = [v for v in values if v is not None]
    value = math.fsum(known) / len(known) if len(known) == len(values) else None
    means = item_means(dict(enumerate(samples)), lambda s: s.score)[0] if all(samples) else {}
    stderr = None
    if len(means) > 1:
        mean = math.fsum(means.values()) / len(means)
        variance = math.fsum((x - mean) ** 2 for x in means.values()) / (len(means) - 1)
        stderr = math.sqrt(variance / len(means))
    return SeededValue(value=value, stderr=stderr, n=max(r.n for r in records), seeds=len(records),
                       truncated=sum(r.truncated for r in records), empty=sum(r.empty for r in records))
