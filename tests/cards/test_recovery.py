"""Recovery (artifact score / reference score) with its paired-bootstrap interval, and the optional minimum."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hfrelease.cards import CardInputs, render_family
from hfrelease.errors import ConfigError
from hfrelease.manifest.loading import parse_manifest
from hfrelease.verdicts.comparison import paired_comparison

ROOT = Path(__file__).resolve().parents[2]


def _scores(correct: int, n: int = 100) -> dict[str, float]:
    return {str(i): 1.0 if i < correct else 0.0 for i in range(n)}


def test_recovery_is_the_ratio_of_means_with_an_interval() -> None:
    """Recovery is artifact mean over reference mean; its interval comes from the same resamples."""
    c = paired_comparison(_scores(76), _scores(80), margin=0.1, seed=1234)
    assert c.recovery == pytest.approx(0.95)
    assert c.recovery_low is not None and c.recovery_high is not None
    assert c.recovery_low < 0.95 < c.recovery_high
    same = paired_comparison(_scores(76), _scores(80), margin=0.1, seed=1234)
    assert (same.ci_low, same.ci_high, same.recovery_low) == (c.ci_low, c.ci_high, c.recovery_low)


def test_recovery_for_lower_is_better_is_inverted() -> None:
    """For a loss, recovery is reference over artifact, so above 1 still means better."""
    low = {str(i): 1.0 for i in range(10)}
    high = {str(i): 2.0 for i in range(10)}
    c = paired_comparison(high, low, margin=5.0, higher_is_better=False)
    assert c.recovery == pytest.approx(0.5)


def test_min_recovery_fails_a_gate_the_margin_passes() -> None:
    """Within the margin but under the minimum recovery is a fail, and the reason says so."""
    c = paired_comparison(_scores(76), _scores(80), margin=0.2, seed=1, min_recovery=0.97)
    assert c.verdict == "fail" and "recovery" in c.reason
    assert paired_comparison(_scores(76), _scores(80), margin=0.2, seed=1, min_recovery=0.9).verdict == "pass"


@pytest.mark.parametrize("value", ["0", "1.5", '"0.95"'])
def test_manifest_refuses_a_bad_min_recovery(value: str) -> None:
    """min_recovery is a number in (0, 1]; anything else is a manifest error."""
    text = (ROOT / "model_cards" / "demo" / "release.toml").read_text()
    text = text.replace('floor = 0.5\n', f'floor = 0.5\nmin_recovery = {value}\n', 1)
    with pytest.raises(ConfigError) as info:
        parse_manifest(text, root=ROOT / "model_cards" / "demo", check_files=False)
    assert "min_recovery" in str(info.value)


def test_card_shows_recovery_beside_the_delta(demo_inputs: CardInputs) -> None:
    """The quant card's quality table prints recovery with its interval, or says every pair agrees."""
    readme = render_family(demo_inputs, plots=False, artifacts=["undertrained"]).cards[0].readme
    row = re.search(r"\| Arithmetic \(thinking\) \| (\d+\.\d) \| (\d+\.\d) \| (-\d+\.\d) "
                    r"\(CI -\d+\.\d to -\d+\.\d, n=100\) \| (\d+\.\d)% \(\d+\.\d to \d+\.\d\) \| \*\*fail\*\* \|",
                    readme)
    assert row, readme.split("## Quality evals")[1][:1500]
    score, reference, delta, recovery = map(float, row.groups())
    assert delta == pytest.approx(score - reference, abs=0.05)  # the artifact's score minus the reference's
    assert recovery == pytest.approx(100 * score / reference, abs=0.05)  # its score over the reference's
    fp8 = render_family(demo_inputs, plots=False, artifacts=["fp8-dynamic"]).cards[0].readme
    assert "| +0.0 (all 100 pairs agree) | 100.0% (all pairs agree) | pass |" in fp8
