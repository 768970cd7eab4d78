"""Regression gates: is an artifact no worse than its reference, on the same samples, by a stated margin?

Method: a **paired bootstrap** of the per-sample difference (artifact - reference, paired by document id),
with a percentile confidence interval. Why this one:

- It works for any per-sample score: 0/1 exact match, partial credit, a similarity in [0, 1], a loss.
- It uses the pairing. A quant and its reference mostly get the *same* questions right and wrong; only the
  discordant pairs carry information about the difference. Comparing two independent proportions ignores
  that and is roughly twice as wide at the discordance rates quants show.
- It is a non-inferiority test: the gate passes when the lower bound of the interval of the delta is at
  least -margin, i.e. "we are confident the artifact loses less than `margin`". A gate that merely fails to
  find a significant difference would pass any artifact on small n; this one does not.

For 0/1 scores the **exact McNemar** test (two-sided binomial test on the discordant pairs) is reported
alongside as `p_value`: the classical exact test of "no difference" on paired binary outcomes. It does not
decide the verdict (non-inferiority does), it tells a reader whether a difference is detectable at all.

How noisy is n = 100? For 0/1 scores the paired delta's standard error is about sqrt(d / n), where d is the
fraction of discordant pairs. The 95% interval's half-width is then about ±4.4 points at d = 5%, ±6.2 at
d = 10% and ±8.8 at d = 20%; two *independent* runs at 70% accuracy would give ±12.7. So with n = 100 a
margin under ~5 points can only pass when the artifact nearly never disagrees with its reference; cards
print the interval so a reader sees this.

**Recovery** is the field's other reading of a quant (llm-compressor's CI and vendors' cards print it): the
artifact's mean over the reference's (reference over artifact for lower-is-better metrics, so above 1 is
always better). Its interval comes from the same bootstrap replicates as the delta's (the ratio of the two
means in each replicate), so the two intervals describe the same resamples. `min_recovery`, when set,
fails a gate whose recovery (the point estimate, as llm-compressor's >= 95 % gate reads it) is below it;
the interval is printed beside it for the reader.

A sign convention keeps every reading the same: `delta` is artifact - reference for higher-is-better
metrics and reference - artifact for lower-is-better ones, so a negative delta always means "worse".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hfrelease.errors import MeasurementError

# Bootstrap rows drawn per block: bounds memory (8 bytes per index) for large n without changing results,
# because the generator's stream is consumed in the same order whatever the block size.
_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The outcome of one paired comparison; `delta`, `ci_low`, `ci_high` are negative when worse."""

    n_paired: int
    n_unpaired: int  # doc ids present on one side only: not compared, reported so a mismatch is visible
    artifact_mean: float
    reference_mean: float
    delta: float
    ci_low: float
    ci_high: float
    confidence: float
    margin: float
    floor: float | None
    p_value: float | None  # exact McNemar, for 0/1 scores only
    # artifact mean / reference mean (inverted for lower-is-better); None when the reference's mean is 0
    recovery: float | None = None
    recovery_low: float | None = None
    recovery_high: float | None = None
    min_recovery: float | None = None
    method: Literal["paired-bootstrap"]
    verdict: Literal["pass", "fail"]
    reason: str


def paired_comparison(
    artifact: Mapping[str, float],
    reference: Mapping[str, float],
    *,
    margin: float,
    higher_is_better: bool = True,
    floor: float | None = None,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    min_recovery: float | None = None,
) -> Comparison:
    """Compare per-sample scores (doc id → score) of an artifact and its reference; see the module docstring.

    `floor` is the worst acceptable mean in the metric's own direction: a minimum when higher is better,
    a maximum when lower is better.
    """
    import numpy as np

    if not (margin >= 0 and math.isfinite(margin)):
        raise ValueError(f"margin must be a finite number >= 0, not {margin}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")

    # Sorted so the bootstrap sees the same order whatever order the harness produced the samples in.
    ids = sorted(artifact.keys() & reference.keys())
    n_unpaired = len(artifact.keys() ^ reference.keys())
    if not ids:
        raise MeasurementError(
            f"no sample is common to the artifact and its reference ({len(artifact)} and {len(reference)} "
            "samples): they cannot be compared",
            hint="Measure both on the same task version and sample selection (n, seed); the reference's "
            "record may be from an older task hash.",
        )
    a = np.array([artifact[i] for i in ids], dtype=np.float64)
    r = np.array([reference[i] for i in ids], dtype=np.float64)
    if not (np.isfinite(a).all() and np.isfinite(r).all()):
        raise MeasurementError("a per-sample score is NaN or infinite; the measurement cannot be compared")
    sign = 1.0 if higher_is_better else -1.0
    diff = sign * (a - r)
    n = len(ids)

    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    a_means = np.empty(resamples, dtype=np.float64)
    r_means = np.empty(resamples, dtype=np.float64)
    rows = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        # Indices drawn as one (rows x n) array: each row is one bootstrap replicate of the paired sample.
        index = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = diff[index].mean(axis=1)
        a_means[start:stop] = a[index].mean(axis=1)
        r_means[start:stop] = r[index].mean(axis=1)
    alpha = 1.0 - confidence
    ci_low, ci_high = (float(x) for x in np.quantile(means, [alpha / 2, 1 - alpha / 2]))
    recovery = recovery_low = recovery_high = None
    top, bottom = (a, r) if higher_is_better else (r, a)
    top_means, bottom_means = (a_means, r_means) if higher_is_better else (r_means, a_means)
    if float(bottom.mean()) > 0 and bool((bottom_means > 0).all()):
        recovery = float(top.mean() / bottom.mean())
        ratios = top_means / bottom_means
        recovery_low, recovery_high = (float(x) for x in np.quantile(ratios, [alpha / 2, 1 - alpha / 2]))

    binary = bool(np.isin(a, (0.0, 1.0)).all() and np.isin(r, (0.0, 1.0)).all())
    p_value = mcnemar_exact(int(((a == 1) & (r == 0)).sum()), int(((a == 0) & (r == 1)).sum())) if binary else None

    artifact_mean, reference_mean, delta = float(a.mean()), float(r.mean()), float(diff.mean())
    pct = f"{confidence:.0%}"
    summary = f"delta {delta:+.4f} ({pct} CI {ci_low:+.4f} to {ci_high:+.4f}) on {n} paired samples"
    verdict: Literal["pass", "fail"] = "pass"
    if ci_low < -margin:
        verdict = "fail"
        reason = f"{summary}: the CI's lower bound is below -{margin:g}, so a loss beyond the margin is not ruled out."
    elif min_recovery is not None and (recovery is None or recovery < min_recovery):
        verdict = "fail"
        got = "cannot be computed (the reference's mean is 0)" if recovery is None else f"is {recovery:.4f}"
        reason = f"{summary} is within the margin, but the recovery {got}, below the minimum {min_recovery:g}."
    elif floor is not None and (artifact_mean < floor if higher_is_better else artifact_mean > floor):
        verdict = "fail"
        side = "below the floor" if higher_is_better else "above the ceiling"
        reason = f"{summary} is within the margin, but the artifact's mean {artifact_mean:.4f} is {side} {floor:g}."
    else:
        reason = f"{summary}: the CI's lower bound is at or above -{margin:g}, so any loss is within the margin."
    return Comparison(
        n_paired=n,
        n_unpaired=n_unpaired,
        artifact_mean=artifact_mean,
        reference_mean=reference_mean,
        delta=delta,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=confidence,
        margin=margin,
        floor=floor,
        p_value=p_value,
        recovery=recovery,
        recovery_low=recovery_low,
        recovery_high=recovery_high,
        min_recovery=min_recovery,
        method="paired-bootstrap",
        verdict=verdict,
        reason=reason,
    )


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for `b` and `c` discordant pairs (binomial(b + c, 1/2) test).

    p = min(1, 2 · P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); no discordant pair means p = 1.
    Computed with exact integers (math.comb), then one division.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    total = b + c
    if total == 0:
        return 1.0
    tail = sum(math.comb(total, k) for k in range(min(b, c) + 1))
    return min(1.0, float(2 * tail / 2**total))
