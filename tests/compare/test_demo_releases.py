"""`hfrelease compare v0.0 v0.1` on the demo's two real releases (scripts/demo): every number is the ledgers'."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hfrelease.compare import ComparedRow, compare_family
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # reads what a finished scripts/demo left in build/ (no server starts)

WORK = ROOT / "build" / "demo-release"
PREVIOUS = ROOT / "build" / "demo-release-v0.0"
# The ledger each release published: its merge job's release-ledger artifact.
LEDGERS = (PREVIOUS / "release" / "artifacts" / "release-ledger", WORK / "release" / "artifacts" / "release-ledger")


def test_compare_on_the_demos_two_releases_reproduces_every_number_from_both_ledgers(tmp_path: Path) -> None:
    """Read back from the demo's Hub, the tags compare as their ledgers do; each value is its record's; the draft's
    rows are the new head against the previous one, with the draft's weights listed as the changed input."""
    # build/downloaded is the demo's last step (after v0.1 is published): a run stopped earlier leaves the ledgers
    # of a release that never reached the Hub.
    if not all(p.is_dir() for p in LEDGERS) or not (WORK / "hub").is_dir() or not (WORK / "downloaded").is_dir():
        pytest.skip("scripts/demo has not run to the end on this machine (build/demo-release, -v0.0)")
    from hfrelease.hub import serve

    shutil.copytree(WORK / "hub", tmp_path / "hub")  # the demo's Hub, read without touching the demo's copy
    server = serve(tmp_path / "hub")
    try:
        tags = compare_family("v0.0", "v0.1", manifest=load_manifest(WORK / "model_cards" / "demo"),
                              endpoint=server.url)
    finally:
        server.shutdown()
    ledgers = compare_family(str(LEDGERS[0]), str(LEDGERS[1]), manifest=None)

    # Intervals included: a release's ledger/ ships the raw `vllm bench serve` repeats (.bench.jsonl) beside its
    # records, so a speed row read from tags is drawn from the same repeats as from the release-ledger artifact.
    def numbers(rows: tuple[ComparedRow, ...]) -> list[tuple[object, ...]]:
        return [(r.key, r.metric, r.old, r.new, r.delta, r.changed, r.ci_low, r.ci_high, r.method, r.n_old, r.n_new,
                 r.verdict) for r in rows]

    assert numbers(tags.rows) == numbers(ledgers.rows)
    # The release-ledger artifact also holds the unpublished artifacts' records (the under-trained variant's),
    # which no repo ships.
    manifest = load_manifest(WORK / "model_cards" / "demo")
    unpublished = {a.id for a in manifest.artifact if not a.publish}
    assert tags.one_sided == tuple(r for r in ledgers.one_sided if r.artifact not in unpublished)
    old_records, new_records = (Ledger(p).records() for p in LEDGERS)
    for row in tags.rows:
        assert row.old_record in old_records and row.new_record in new_records
        assert row.old == row.old_record.metrics[row.metric].value
        assert row.new == row.new_record.metrics[row.metric].value
        assert row.delta == pytest.approx(row.new - row.old)
    assert any(r.kind == "speed" and r.ci_low is not None for r in tags.rows)
    drafted = [r for r in tags.rows if r.draft == "draft"]
    assert {r.metric for r in drafted} >= {"spec_acceptance_rate", "output_throughput"}
    assert all("draft weights" in [c.name for c in r.changed] for r in drafted)
    assert {(r.side, r.kind) for r in tags.one_sided} >= {("new", "gate")}  # v0.0 ran no quality gates
