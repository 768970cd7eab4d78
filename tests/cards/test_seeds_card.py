"""Cards of a gate run under several seeds: the number of seeds shown, every seed's record cited, none missing."""

from __future__ import annotations

import pytest

from hfrelease.cards import CardInputs, MissingMeasurementError, render_family


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
