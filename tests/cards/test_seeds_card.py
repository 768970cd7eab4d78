"""Cards of a gate run under several seeds: the number of seeds shown, every seed's record cited, none missing."""

from __future__ import annotations

import pytest

from hfrelease.cards import CardInputs, MissingMeasurementError, render_family
from hfrelease.cards.inputs import RecordEntry


def test_seeded_gate_shows_its_seeds(nanbeige: CardInputs) -> None:
    """GSM8K (three seeds in the flagship manifest) says so, and its value cites all three runs' records."""
    card = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).cards[0]
    assert "| GSM8K, 3 seeds | " in card.readme
    assert "seeds 1234, 1235, 1236 (one run each, items averaged over them)" in card.readme
    numbers = {row.id: row for row in card.numbers}
    assert numbers["gate.gsm8k.fp8-dynamic.seeds"].text == "3"
    assert len(numbers["gate.gsm8k.fp8-dynamic.value"].records) == 3
    assert len(numbers["gate.gsm8k.fp8-dynamic.delta"].records) == 6  # the artifact's three and the reference's
    assert "gate.ifeval.fp8-dynamic.seeds" not in numbers  # one run: no seed count


def test_a_missing_seed_stops_the_render(nanbeige: CardInputs) -> None:
    """A seed of `seeds` the ledger lacks is named, as a missing gate record is."""
    records = tuple(e for e in nanbeige.records
                    if not (e.record.artifact_id == "nvfp4a16" and e.record.subject_id == "gsm8k"
                            and e.record.seed == 1235))
    inputs = CardInputs(manifest=nanbeige.manifest, records=records, sections=nanbeige.sections, files=nanbeige.files)
    with pytest.raises(MissingMeasurementError, match="no ledger record of seed 1235"):
        render_family(inputs, plots=False)


def test_load_sweep_shows_acceptance_at_every_point(nanbeige: CardInputs) -> None:
    """A speculative load sweep has an acceptance column and the acceptance held over the whole sweep,
    summed from every point's counters; a sweep without speculation has neither."""
    card = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).cards[0]
    load = card.readme[card.readme.index("## Performance under load"):card.readme.index("## Context-length sweep")]
    assert "| Failed requests | Acceptance |" in load
    rows = [line for line in load.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 5 and all(line.endswith("| 0.41 |") for line in rows)
    points = nanbeige_points(nanbeige, "articles-load")
    accepted = sum(p.record.metrics["spec_accepted_tokens"].value for p in points)
    drafted = sum(p.record.metrics["spec_draft_tokens"].value for p in points)
    assert f"{accepted:.0f} accepted of {drafted / 1000:.0f}k drafted tokens ({accepted / drafted:.2f})" in load
    numbers = {row.id: row for row in card.numbers}
    assert len(numbers["speed.fp8-dynamic.articles-load.eagle3.held.rate"].records) == 5


def nanbeige_points(inputs: CardInputs, workload: str) -> list[RecordEntry]:
    """The speed records of one workload's eagle3 config on fp8-dynamic in the synthetic flagship ledger."""
    return [e for e in inputs.records if e.record.kind == "speed" and e.record.subject_id == workload
            and e.record.artifact_id == "fp8-dynamic" and e.record.extra["speculative"] == "eagle3"]


def test_context_sweep_table(nanbeige: CardInputs) -> None:
    """The flagship's reasoning workload sweeps 1k/4k/16k input tokens: one row per length, no speculation
    first, the speculative config with its acceptance and speedup at the same length, sampling named."""
    card = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).cards[0]
    sweep = card.readme[card.readme.index("## Context-length sweep"):]
    headings = [line for line in sweep.splitlines() if line.startswith("### ")]
    assert headings[:2] == ["### Reasoning (thinking on), `none`, 256 output tokens, temperature 0.6, top-p 0.95",
                            "### Reasoning (thinking on), `eagle3`, 256 output tokens, temperature 0.6, top-p 0.95"]
    lengths = [line.split(" | ")[0] for line in sweep.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert lengths[:6] == ["| 1024", "| 4096", "| 16384", "| 1024", "| 4096", "| 16384"]
    numbers = {row.id for row in card.numbers}
    assert "speed.reasoning.fp8-dynamic.eagle3.c1.in4096.speedup" in numbers
    assert any(n.startswith("speed.reasoning.fp8-dynamic.none.c1.in16384.") for n in numbers)


def test_draft_card_shows_the_matrix_and_targets_link_it(nanbeige: CardInputs) -> None:
    """The flagship's EAGLE-3 head (its matrix names both NVFP4 quants) shows every target per workload, one
    recommended pairing each (the largest speedup); a target it was measured against links the draft's card."""
    family = render_family(nanbeige, plots=False)
    card = family.card("eagle3").readme
    matrix = card[card.index("## Draft \u00d7 target matrix"):]
    tables = matrix.split("### ")[1:4]
    assert [t.splitlines()[0] for t in tables] == ["Reasoning (thinking on), concurrency 1",
                                                   "Long-document summarization, concurrency 1",
                                                   "Real articles under load, concurrency 1"]
    rows = [[line for line in table.splitlines() if line.startswith("| [")] for table in tables]
    # Reasoning and long documents serve every artifact; the load workload its trained target, FP8, and the
    # two NVFP4 quants the manifest's matrix names.
    assert [len(r) for r in rows] == [4, 4, 3]
    # At most one recommended pairing per workload, and none that another config beats on its target or that is
    # not known to beat the reference served alone (issue 24): n-gram is faster than EAGLE-3 on every target of
    # the long documents; the load workload never served the reference without speculation.
    assert [sum("**recommended**" in line for line in table) for table in rows] == [1, 0, 0]
    assert all(line.endswith("| pays; `ngram` is faster on it |") for line in rows[1])
    assert "no speedup measured" in rows[2][0]  # fp8 has no c1 baseline there
    assert rows[2][1].endswith("| pays; the reference alone not measured |")
    link = ("Speculative drafts measured against this artifact (their cards' draft \u00d7 target matrix): "
            "[Nanbeige4.2-3B-EAGLE3]")
    assert link in family.card("nvfp4a16").readme
    assert link not in family.card("fp8-dynamic").readme  # its trained target: the draft's card is about it anyway
