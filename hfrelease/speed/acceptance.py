"""Acceptance resampled over prompts, and whether speculation changed the output tokens.

Greedy repeats of a point give identical counters, so an interval over repeats is zero wide and calls any
difference a change. What varies is the prompt: a draft that predicts one kind of text well and another
badly. So every acceptance interval here is a percentile bootstrap over the point's requests (each
request's accepted and drafted counts from `hfrelease.speed.per_request`, resampled with replacement, the
rate recomputed as a pooled ratio of the resampled sums, as the record's own figure is).

Losslessness is measured, not assumed: at temperature 0, a speculative config's output tokens for each
prompt are compared with no speculation's on the same server build (same vLLM version) and the share of
prompts whose tokens are identical is recorded, with the first differing position of each that is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hfrelease.speed.per_request import RequestOutcome

CONFIDENCE = 0.95
RESAMPLES = 2_000
RATE = "spec_acceptance_rate"
LENGTH = "spec_mean_acceptance_length"
IDENTICAL = "identical_output_share"  # the metric a speculative point records at temperature 0


def _counts(summaries: Sequence[Mapping[str, Any]]) -> tuple[list[list[float]], int] | None:
    """Per request: [accepted, drafted, steps, accepted at each position...], and the depth; None without."""
    rows: list[list[float]] = []
    depth = 0
    for item in summaries:
        if "accepted" not in item:
            return None
        per_pos = item.get("accepted_per_pos") or []
        depth = max(depth, len(per_pos))
        rows.append([float(item["accepted"]), float(item["drafted"]), float(item["steps"]), *map(float, per_pos)])
    if not rows:
        return None
    return [row + [0.0] * (3 + depth - len(row)) for row in rows], depth


def _figures(sums: Any, depth: int) -> dict[str, Any]:
    import numpy as np

    accepted, drafted, steps = sums[..., 0], sums[..., 1], sums[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        found = {
            RATE: np.where(drafted > 0, accepted / drafted, 0.0),
            LENGTH: np.where(steps > 0, 1.0 + accepted / steps, 1.0),
        }
        for i in range(depth):
            found[f"spec_acceptance_pos_{i}"] = np.where(steps > 0, sums[..., 3 + i] / steps, 0.0)
    return found


def resampled(summaries: Sequence[Mapping[str, Any]], *, seed: int = 0, index: Any = None) -> dict[str, Any] | None:
    """Each acceptance figure over `RESAMPLES` bootstrap resamples of the requests (numpy arrays); None when
    the requests carry no speculative counters. `index` (resamples x requests) fixes the draws (paired use)."""
    import numpy as np

    counted = _counts(summaries)
    if counted is None:
        return None
    rows, depth = counted
    data = np.asarray(rows, dtype=np.float64)
    if index is None:
        index = np.random.default_rng(seed).integers(0, len(data), size=(RESAMPLES, len(data)))
    return _figures(data[index].sum(axis=1), depth)


def intervals(summaries: Sequence[Mapping[str, Any]], *, seed: int = 0) -> dict[str, list[float]]:
    """The 95 % interval of each acceptance figure, resampling prompts; {} without per-request counters."""
    import numpy as np

    draws = resampled(summaries, seed=seed)
    if draws is None:
        return {}
    alpha = 1.0 - CONFIDENCE
    return {
        name: [round(float(v), 6) for v in np.quantile(values, [alpha / 2, 1 - alpha / 2])]
        for name, values in draws.items()
    }


def difference_interval(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], metric: str, *, paired: bool, seed: int = 0,
    scale: float = 1.0,
) -> tuple[float, float] | None:
    """95 % interval of NEW - scale x OLD of an acceptance figure, resampling prompts: the same prompts drawn on
    both sides when `paired` (the same prompt set, so a prompt's own difficulty cancels), else each side its own.
    `scale` < 1: the own-head gate's share of the reference's rate (`verdict.own_head_checks`)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if paired and len(old) == len(new):
        index = rng.integers(0, len(new), size=(RESAMPLES, len(new)))
        a, b = resampled(old, index=index), resampled(new, index=index)
    else:
        a = resampled(old, index=rng.integers(0, max(1, len(old)), size=(RESAMPLES, len(old))) if old else None)
        b = resampled(new, index=rng.integers(0, max(1, len(new)), size=(RESAMPLES, len(new))) if new else None)
    if a is None or b is None or metric not in a or metric not in b:
        return None
    alpha = 1.0 - CONFIDENCE
    low, high = (float(x) for x in np.quantile(b[metric] - scale * a[metric], [alpha / 2, 1 - alpha / 2]))
    return low, high


def request_rates(summaries: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each request's own acceptance rate (requests that drafted nothing left out): the per-prompt spread."""
    return [float(s["accepted"]) / float(s["drafted"]) for s in summaries if s.get("drafted")]


@dataclass(frozen=True, kw_only=True)
class OutputMatch:
    """How a speculative config's outputs compare with no speculation's, prompt by prompt."""

    prompts: int
    identical: int
    first_difference: tuple[int, ...]  # per differing prompt, the first output position that differs

    @property
    def share(self) -> float:
        return self.identical / self.prompts if self.prompts else 0.0

    def as_extra(self, baseline: str) -> dict[str, Any]:
        return {
            "prompts": self.prompts,
            "identical": self.identical,
            "first_difference": list(self.first_difference),
            "baseline": baseline,
        }


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two token sequences differ (a length difference counts); None when equal."""
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return position
    return None if len(a) == len(b) else min(len(a), len(b))


def match_outputs(spec: Sequence[RequestOutcome], baseline: Sequence[RequestOutcome]) -> OutputMatch:
    """Prompt by prompt (both in prompt order), whether `spec`'s tokens equal `baseline`'s."""
    if len(spec) != len(baseline):
        raise ValueError(f"{len(spec)} speculative answers but {len(baseline)} without speculation")
    differences = [
        d
        for s, b in zip(spec, baseline, strict=True)
        if (d := first_difference(s.output_ids, b.output_ids)) is not None
    ]
    return OutputMatch(prompts=len(spec), identical=len(spec) - len(differences), first_difference=tuple(differences))
