"""Paired regression gates: bootstrap CI of the delta, exact McNemar, margin and floor verdicts."""

from __future__ import annotations

import math

import pytest

from hfrelease.errors import MeasurementError
from hfrelease.verdicts import comparison
from hfrelease.verdicts.comparison import mcnemar_exact, paired_comparison

pytestmark = pytest.mark.unit


def scores(values: list[float]) -> dict[str, float]:
    return {f"doc-{i}": v for i, v in enumerate(values)}


def test_identical_samples_pass_with_zero_delta() -> None:
    """Identical per-sample scores give delta 0, a CI containing 0, McNemar p = 1, and a pass."""
    same = scores([1.0, 0.0] * 50)
    result = paired_comparison(same, dict(same), margin=0.02)
    assert result.delta == 0.0
    assert result.ci_low <= 0.0 <= result.ci_high
    assert result.p_value == 1.0
    assert result.n_paired == 100
    assert result.verdict == "pass"
    assert result.method == "paired-bootstrap"


def test_clearly_worse_artifact_fails() -> None:
    """0.5 vs 0.9 on 100 paired samples: delta -0.4, the CI excludes 0, the gate fails."""
    reference = scores([1.0] * 90 + [0.0] * 10)
    artifact = scores([1.0] * 50 + [0.0] * 50)
    result = paired_comparison(artifact, reference, margin=0.05)
    assert (result.artifact_mean, result.reference_mean) == (0.5, 0.9)
    assert result.delta == pytest.approx(-0.4)
    assert result.ci_high < 0
    assert result.verdict == "fail"
    assert "below -0.05" in result.reason
    assert result.p_value is not None
    assert result.p_value < 1e-9  # 40 discordant pairs, all one way: 2 / 2**40


def test_mcnemar_matches_the_binomial_by_hand() -> None:
    """10 vs 2 discordant pairs give p = 2 * (C(12,0)+C(12,1)+C(12,2)) / 2**12 = 158/4096."""
    assert mcnemar_exact(10, 2) == pytest.approx(158 / 4096)
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0

    # The same counts, reached through paired samples: 10 artifact-only wins, 2 reference-only wins.
    artifact = scores([1.0] * 10 + [0.0] * 2 + [1.0] * 50 + [0.0] * 38)
    reference = scores([0.0] * 10 + [1.0] * 2 + [1.0] * 50 + [0.0] * 38)
    result = paired_comparison(artifact, reference, margin=0.0)
    assert result.p_value == pytest.approx(158 / 4096)
    assert result.delta == pytest.approx(0.08)
    assert result.verdict == "pass"


def test_lower_is_better_flips_the_sign() -> None:
    """For a lower-is-better metric a higher artifact value is a negative (worse) delta."""
    reference = scores([2.0 + 0.01 * i for i in range(100)])
    worse = {k: v + 0.5 for k, v in reference.items()}
    better = {k: v - 0.5 for k, v in reference.items()}

    failed = paired_comparison(worse, reference, margin=0.1, higher_is_better=False)
    passed = paired_comparison(better, reference, margin=0.1, higher_is_better=False)

    assert failed.delta == pytest.approx(-0.5)
    assert failed.verdict == "fail"
    assert passed.delta == pytest.approx(0.5)
    assert passed.verdict == "pass"
    assert failed.p_value is None


def test_floor_fails_an_otherwise_passing_gate() -> None:
    """Within the margin but under the floor is a fail, and the reason says so."""
    same = scores([1.0] * 60 + [0.0] * 40)
    assert paired_comparison(same, same, margin=0.02, floor=0.5).verdict == "pass"
    result = paired_comparison(same, same, margin=0.02, floor=0.7)
    assert result.verdict == "fail"
    assert "below the floor 0.7" in result.reason


def test_seed_makes_it_deterministic() -> None:
    """The same seed gives the same interval; another seed a (slightly) different one."""
    # Continuous scores: with 0/1 scores the quantiles fall on a 1/n grid and two seeds often agree.
    reference = scores([(i * 37 % 101) / 101 for i in range(100)])
    artifact = scores([(i * 53 % 103) / 103 for i in range(100)])
    first = paired_comparison(artifact, reference, margin=0.05, seed=7)
    assert paired_comparison(artifact, reference, margin=0.05, seed=7) == first
    other = paired_comparison(artifact, reference, margin=0.05, seed=8)
    assert (other.ci_low, other.ci_high) != (first.ci_low, first.ci_high)


def test_blocked_resampling_does_not_change_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawing the bootstrap indices in memory-bounded blocks gives exactly the one-array result."""
    reference = scores([float(i % 3 != 0) for i in range(100)])
    artifact = scores([float(i % 5 != 0) for i in range(100)])
    whole = paired_comparison(artifact, reference, margin=0.05, resamples=2000)
    monkeypatch.setattr(comparison, "_BLOCK_ELEMENTS", 100 * 7)  # 7 rows per block
    assert paired_comparison(artifact, reference, margin=0.05, resamples=2000) == whole


def test_non_binary_scores_have_no_p_value() -> None:
    """Partial-credit scores are bootstrapped but get no McNemar p-value."""
    reference = scores([0.5, 0.25, 1.0, 0.75] * 25)
    result = paired_comparison(reference, reference, margin=0.01)
    assert result.p_value is None
    assert result.verdict == "pass"


def test_unpaired_samples_are_counted_not_compared() -> None:
    """Only doc ids present on both sides are paired; the rest are counted."""
    artifact = {"a": 1.0, "b": 0.0, "only-artifact": 1.0}
    reference = {"a": 1.0, "b": 0.0, "only-reference": 0.0, "also-reference": 1.0}
    result = paired_comparison(artifact, reference, margin=0.0)
    assert (result.n_paired, result.n_unpaired) == (2, 3)
    assert result.artifact_mean == 0.5


def test_no_common_samples_is_a_measurement_error() -> None:
    """Zero paired samples cannot be compared: a typed error, not a verdict."""
    with pytest.raises(MeasurementError, match="no sample is common"):
        paired_comparison({"a": 1.0}, {"b": 1.0}, margin=0.1)


def test_ci_width_at_n100_matches_the_documented_noise() -> None:
    """With 10% discordant pairs at n=100, the 95% CI half-width is about the documented ±6 points."""
    reference = scores([1.0] * 70 + [0.0] * 30)
    artifact = scores([0.0] * 5 + [1.0] * 65 + [1.0] * 5 + [0.0] * 25)  # 5 lost, 5 gained: delta 0
    result = paired_comparison(artifact, reference, margin=0.1)
    half_width = (result.ci_high - result.ci_low) / 2
    assert half_width == pytest.approx(1.96 * math.sqrt(0.1 / 100), abs=0.01)
