"""`hfrelease compare`'s speed verdicts against session noise (issue 24, part 1), on planted ledgers.

A speed record's repeats run back to back on one server: what varies between server sessions is measured
from A/A groups (one input key recorded in several sessions on one host, a row whose inputs did not change)
and every throughput verdict must exceed it (`hfrelease.speed.noise`).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from hfrelease.compare import compare_family, comparison_json, comparison_markdown
from hfrelease.compare.rows import ComparedRow
from hfrelease.ledger.store import Ledger
from hfrelease.speed.noise import t_quantile
from tests.conftest import ROOT
from tests.ledger_pairs import median_interval, write_ledger, write_speed

pytestmark = pytest.mark.unit


def _rows(old: Path, new: Path, metric: str = "output_throughput") -> dict[tuple[str, str], ComparedRow]:
    comparison = compare_family(str(old), str(new), manifest=None)
    return {(r.subject, r.config.split()[0]): r for r in comparison.rows if r.metric == metric}


def test_a_row_whose_inputs_did_not_change_is_never_better_or_worse(tmp_path: Path) -> None:
    """The same key on the same host, 100 tok/s then 150 with tight repeats: the repeats' interval excludes 0,
    yet nothing changed but the session, so the verdict is "within session noise" and the spread is shown."""
    write_speed(write_ledger(tmp_path / "a"), throughputs=(100.0, 101.0, 99.0), acceptances=(0.5, 0.5, 0.5))
    write_speed(write_ledger(tmp_path / "b"), throughputs=(150.0, 151.0, 149.0), acceptances=(0.7, 0.7, 0.7), step=1)
    rows = compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None).rows
    assert {r.metric for r in rows} == {"output_throughput", "spec_acceptance_rate"}
    for row in rows:
        assert row.changed == () and row.verdict == "within session noise", row
    speed = next(r for r in rows if r.metric == "output_throughput")
    # The two sessions are themselves an A/A group (df 1): the interval shown is their spread, t(0.975, 1) wide.
    assert speed.ci_low is not None and speed.ci_high is not None and speed.ci_low < 0 < speed.ci_high
    assert speed.method == "session-noise"
    assert "| within session noise |" in comparison_markdown(compare_family(str(tmp_path / "a"), str(tmp_path / "b"),
                                                                            manifest=None))


def test_the_same_key_recorded_twice_is_one_measurement_of_both_sessions(tmp_path: Path) -> None:
    """A key recorded in two sessions of the new ledger is one row whose repeats are both sessions' (value: the
    median of the six), not the newest session alone; the two sessions are an A/A group of the session noise."""
    write_speed(write_ledger(tmp_path / "a"), throughputs=(100.0, 102.0, 98.0), draft_weights="d0")
    new = write_ledger(tmp_path / "b")
    write_speed(new, throughputs=(120.0, 121.0, 119.0), step=1)
    write_speed(new, throughputs=(140.0, 141.0, 139.0), step=2)
    comparison = compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None)
    (row,) = [r for r in comparison.rows if r.metric == "output_throughput"]
    assert len(comparison.rows) == 1 and comparison.one_sided == ()
    assert (row.sessions_old, row.sessions_new, row.n_old, row.n_new) == (1, 2, 3, 6)
    assert row.new == statistics.median([120.0, 121.0, 119.0, 140.0, 141.0, 139.0]) == 130.0
    assert comparison.noise is not None and comparison.noise.df == 1
    assert comparison.noise.sigma == pytest.approx(abs(math.log(140.0 / 120.0)) / math.sqrt(2))
    data = comparison_json(comparison)
    assert data["rows"][0]["sessions_new"] == 2 and data["session_noise"]["df"] == 1


def _plant_noise(ledger: Ledger, sessions: tuple[float, ...], *, workload: str = "aa", cpu: str = "AMD EPYC") -> None:
    """One A/A group: the no-speculation point of `workload` recorded once per value (three tight repeats each)."""
    for step, value in enumerate(sessions):
        write_speed(ledger, workload=workload, speculative="none", draft=None,
                    throughputs=(value - 1, value, value + 1), step=step, cpu=cpu)


def test_a_change_must_exceed_the_measured_session_noise(tmp_path: Path) -> None:
    """Pooled over the A/A groups of both ledgers (one-way ANOVA on ln tok/s, Student's t with the pooled df), the
    interval of NEW - OLD is old * (exp(ln(new/old) +/- t s sqrt(1/m_old + 1/m_new)) - 1), the repeats' interval
    inside it: a 1.5x change passes a 2 % session noise and not a 25 % one, though its repeats never overlap."""
    for name, spread in (("quiet", (100.0, 102.0, 101.0, 99.0)), ("noisy", (100.0, 140.0, 90.0, 120.0))):
        old, new = write_ledger(tmp_path / name / "a"), write_ledger(tmp_path / name / "b")
        _plant_noise(old, spread[:2])
        _plant_noise(new, spread[2:], workload="bb")
        write_speed(old, throughputs=(100.0, 101.0, 99.0), draft_weights="d0")
        write_speed(new, throughputs=(150.0, 151.0, 149.0), step=1)
        comparison = compare_family(str(old.root), str(new.root), manifest=None)
        row = _rows(old.root, new.root)[("chat", "draft")]
        logs = [[math.log(v) for v in spread[:2]], [math.log(v) for v in spread[2:]]]
        sigma = math.sqrt(sum((x - statistics.mean(g)) ** 2 for g in logs for x in g) / 2)
        assert comparison.noise is not None and comparison.noise.sigma == pytest.approx(sigma)
        half = t_quantile(2) * sigma * math.sqrt(2)
        low, high = median_interval([100.0, 101.0, 99.0], [150.0, 151.0, 149.0])
        expected = (min(low, 100 * math.expm1(math.log(1.5) - half)), max(high, 100 * math.expm1(math.log(1.5) + half)))
        assert (row.ci_low, row.ci_high) == pytest.approx(expected)
        assert row.method == "session-noise" and [c.name for c in row.changed] == ["draft weights"]
        assert row.verdict == ("better" if name == "quiet" else "within session noise")
        assert "(between sessions, A/A noise)" in comparison_markdown(comparison)


def test_sessions_on_another_host_are_not_an_aa_pair(tmp_path: Path) -> None:
    """A key recorded on two CPUs measures two hosts, not session noise: no A/A group, and its row names the
    hardware as a changed input."""
    old, new = write_ledger(tmp_path / "a"), write_ledger(tmp_path / "b")
    write_speed(old, throughputs=(100.0, 101.0, 99.0))
    write_speed(new, throughputs=(150.0, 151.0, 149.0), step=1, cpu="Intel Xeon")
    comparison = compare_family(str(old.root), str(new.root), manifest=None)
    (row,) = [r for r in comparison.rows if r.metric == "output_throughput"]
    assert comparison.noise is None and row.verdict == "session noise unmeasured"
    assert [(c.name, c.old, c.new) for c in row.changed] == [
        ("hardware", '{"cpu": "AMD EPYC"}', '{"cpu": "Intel Xeon"}')]


def test_the_committed_demo_releases_call_no_unchanged_row_better_or_worse() -> None:
    """The demo's two recorded releases (v0.0's ledger in tests/fixtures, v0.1's committed under model_cards/demo):
    every row whose inputs did not change is within session noise (never better or worse), and what is better
    or worse is a retrained draft's (the draft model's, the EAGLE-3 head's), whose weights are the changed input.
    In CI, where `scripts/demo` does not run (tests/compare/test_demo_releases.py needs it), this is the two real
    releases' compare."""
    old, new = ROOT / "tests" / "fixtures" / "ledger_demo_v0.0", ROOT / "model_cards" / "demo" / "results"
    comparison = compare_family(str(old), str(new), manifest=None)
    assert comparison.noise is not None and comparison.noise.df >= 2
    unchanged = [r for r in comparison.rows if not r.changed]
    assert unchanged and all(r.verdict not in ("better", "worse") for r in unchanged)
    judged = [r for r in comparison.rows if r.verdict in ("better", "worse")]
    assert judged and all(r.draft in ("draft", "eagle3") and r.changed for r in judged)
