"""`hfrelease compare` on a gate run under several seeds: all of its seeds' records are one measurement."""

from __future__ import annotations

import math
from pathlib import Path

from hfrelease.compare import compare_family
from hfrelease.compare.report import comparison_json
from hfrelease.compare.rows import RESAMPLES
from hfrelease.ledger.record import LedgerRecord
from hfrelease.manifest import load_manifest
from hfrelease.verdicts.comparison import paired_comparison
from tests.ledger_pairs import gate_record, write_ledger

DEMO = Path(__file__).resolve().parents[2] / "model_cards" / "demo"
GATE = "arith-sampled"  # the demo's seeded gate: seeds = [1, 2, 3], sampled at T=0.6


def _runs(accuracy: float, *, tag: str, seeds: tuple[int, ...] = (1, 2, 3), **kwargs: object) -> list[LedgerRecord]:
    """One record per seed of the sampled gate, each with its own made-up answers."""
    return [gate_record(family="demo", gate=GATE, accuracy=accuracy, seed=f"{tag}{s}", run_seed=s,
                        temperature=0.6, **kwargs) for s in seeds]  # type: ignore[arg-type]


def _item_means(records: list[LedgerRecord]) -> dict[str, float]:
    docs = [s.doc_id for s in records[0].samples]
    return {d: math.fsum(next(x.score for x in r.samples if x.doc_id == d) for r in records) / len(records)
            for d in docs}


def test_a_seeded_gate_is_compared_over_all_of_its_seeds(tmp_path: Path) -> None:
    """Values are the seeds' mean, the paired interval is over each item's seed-mean; not one seed's record."""
    olds, news = _runs(0.5, tag="o"), _runs(0.8, tag="n", step=1)
    write_ledger(tmp_path / "old", *olds)
    write_ledger(tmp_path / "new", *news)
    comparison = compare_family(str(tmp_path / "old"), str(tmp_path / "new"), manifest=None)
    (row,) = comparison.rows
    assert not comparison.one_sided
    old_value = math.fsum(r.metrics["exact_match,answer"].value for r in olds) / 3
    new_value = math.fsum(r.metrics["exact_match,answer"].value for r in news) / 3
    assert (row.old, row.new) == (old_value, new_value) and row.delta == new_value - old_value
    assert old_value not in {r.metrics["exact_match,answer"].value for r in olds}  # not one seed's value
    paired = paired_comparison(_item_means(news), _item_means(olds), margin=0.0, higher_is_better=True,
                               confidence=0.95, resamples=RESAMPLES)
    assert (row.ci_low, row.ci_high, row.method) == (paired.ci_low, paired.ci_high, "paired-bootstrap")
    assert [r.seed for r in row.old_runs] == [r.seed for r in row.new_runs] == [1, 2, 3]
    assert row.changed and all(c.name not in ("seed", "seeds") for c in row.changed)
    (shown,) = comparison_json(comparison)["rows"]
    assert (shown["seeds_old"], shown["seeds_new"]) == (3, 3)


def test_the_manifest_names_the_seeds_and_other_weights_are_not_a_seed(tmp_path: Path) -> None:
    """With the manifest, a seed it no longer lists is left out; a seed recorded for older weights never joins."""
    manifest = load_manifest(DEMO / "release.toml", check_files=False)
    stale = gate_record(family="demo", gate=GATE, accuracy=0.1, seed="stale", run_seed=9, temperature=0.6)
    older = gate_record(family="demo", gate=GATE, accuracy=0.1, seed="older", run_seed=4, temperature=0.6,
                        weights="w0")
    olds = _runs(0.5, tag="o")
    write_ledger(tmp_path / "old", older, stale, *olds)
    write_ledger(tmp_path / "new", *_runs(0.5, tag="n", seeds=(1, 2), step=1))
    with_manifest = compare_family(str(tmp_path / "old"), str(tmp_path / "new"), manifest=manifest)
    (row,) = with_manifest.rows
    assert [r.seed for r in row.old_runs] == [1, 2, 3] and [r.seed for r in row.new_runs] == [1, 2]
    assert [(c.name, c.old, c.new) for c in row.changed if c.name == "seeds"] == [("seeds", "1, 2, 3", "1, 2")]
    # Without it, the sampled siblings of the newest record: seed 9 joins, seed 4 (other weights) does not.
    (bare,) = compare_family(str(tmp_path / "old"), str(tmp_path / "new"), manifest=None).rows
    assert [r.seed for r in bare.old_runs] == [1, 2, 3, 9]


def test_a_greedy_gate_recorded_under_two_seeds_compares_its_newest_record(tmp_path: Path) -> None:
    """Greedy runs under another seed repeat one measurement: the newest record alone is compared, as before."""
    first = gate_record(family="demo", gate="arith", accuracy=0.5, seed="a", run_seed=1)
    second = gate_record(family="demo", gate="arith", accuracy=0.6, seed="b", run_seed=2, step=1)
    write_ledger(tmp_path / "old", first, second)
    write_ledger(tmp_path / "new", gate_record(family="demo", gate="arith", accuracy=0.7, seed="c", run_seed=2,
                                               step=2))
    (row,) = compare_family(str(tmp_path / "old"), str(tmp_path / "new"), manifest=None).rows
    assert row.old == second.metrics["exact_match,answer"].value and not row.old_runs[1:]
    assert row.old_record == second
