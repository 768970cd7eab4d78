"""A quant card states its output throughput over the reference's on the reference's workloads, with its range."""

from __future__ import annotations

import re

from hfrelease.cards import CardInputs, lint_cards, render_family
from hfrelease.cards.card_text import CardText

TIMES, DASH = "\u00d7", "\u2013"


def test_quant_headline_states_output_throughput_over_the_reference(nanbeige: CardInputs) -> None:
    """fp8-dynamic (244 tok/s) over bf16 (170 tok/s) on each workload both ran without speculation: 1.44x,
    its range from the repeats' extremes (0.97 and 1.02 of the median in the synthetic ledger), every
    figure registered with both records."""
    card = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    lines = [line for line in card.readme.splitlines() if "the reference's without speculation" in line]
    assert len(lines) == 2  # reasoning and long-document summarization; the load sweep ran on fp8 alone
    ratio, low, high = 244 / 170, 244 * 0.97 / (170 * 1.02), 244 * 1.02 / (170 * 0.97)
    assert lines[0].startswith(f"- Reasoning (thinking on): output throughput {ratio:.2f}{TIMES} "
                               f"({low:.2f}{DASH}{high:.2f} over repeats) the reference's without speculation, "
                               "batch-1: 244.0 (")
    numbers = {row.id: row for row in card.numbers}
    row = numbers["speed.reasoning.fp8-dynamic.none.c1.vs_reference"]
    assert row.text == f"{ratio:.2f}" and len(row.records) == 2
    assert numbers["speed.reasoning.fp8-dynamic.none.c1.vs_reference.min"].text == f"{low:.2f}"
    # The family table gives absolute tok/s with the repeats' range (issue 25: ranked by what a reader gets);
    # the ratio over the reference is the opening's and the lines above.
    table = card.readme.split("## Which artifact should I choose?")[1].split("<!-- measured:end -->")[0]
    row = next(line for line in table.splitlines() if "**[Nanbeige4.2-3B-FP8-Dynamic]" in line)
    assert re.search(rf"\| \d+\.\d \(\d+\.\d{DASH}\d+\.\d\) `eagle3` \|", row)
    opening = card.readme.split("<!-- measured:begin -->")[1].split("<!-- measured:end -->")[0]
    assert f"{ratio:.2f}{TIMES} ({low:.2f}{DASH}{high:.2f} over repeats) the reference's" in opening


def test_reference_card_states_no_speedup_over_itself(nanbeige: CardInputs) -> None:
    """The reference's card has no "the reference's" output throughput line; a draft's card neither."""
    family = render_family(nanbeige, plots=False, artifacts=["bf16", "eagle3"])
    for card in family.cards:
        assert "the reference's without speculation" not in card.readme, card.artifact_id


def test_slower_quant_is_stated_and_passes_the_lint(nanbeige: CardInputs) -> None:
    """A quant slower than the reference (a CPU emulating FP8) says so with its ratio below 1x: the
    "slowdown headlined as best" rule is about speculative configs, not about a quant's speed."""
    from card_fixtures import NANBEIGE_QUALITY, NANBEIGE_SIZES
    from synthetic import family_ledger

    from hfrelease.cards import entry_for

    manifest = nanbeige.manifest
    records = family_ledger(manifest, quality=NANBEIGE_QUALITY, sizes=NANBEIGE_SIZES,
                            speed={"bf16": 300.0, "fp8-dynamic": 120.0, "nvfp4-fp8-loopshield": 251.0,
                                   "nvfp4a16": 262.0})
    inputs = CardInputs(manifest=manifest, records=tuple(entry_for(r, {s.doc_id: s.score for s in r.samples},
                                                                   r.samples) for r in records),
                        sections=nanbeige.sections, files=nanbeige.files)
    card = render_family(inputs, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    assert f"output throughput 0.40{TIMES}" in card.readme
    text = CardText(artifact_id="fp8-dynamic", path=manifest.root / "fp8-dynamic" / "README.md", text=card.readme)
    assert not [p for p in lint_cards(manifest, [text]) if "slower than no speculation" in p]


def test_lint_finds_a_quant_card_rendered_before_its_speed_records(nanbeige: CardInputs) -> None:
    """A quant card rendered without speed records ("not measured"), linted against a ledger that holds the
    quant's and the reference's points, is told it states no output throughput against the reference."""
    from card_fixtures import nanbeige_inputs

    stale = render_family(nanbeige_inputs(nanbeige.manifest, with_speed=False), plots=False,
                          artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    fresh = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    path = nanbeige.manifest.root / "fp8-dynamic" / "README.md"
    found = lint_cards(nanbeige.manifest, [CardText(artifact_id="fp8-dynamic", path=path, text=stale.readme)],
                       inputs=nanbeige)
    mine = [p for p in found if "states no output throughput against the reference" in p]
    assert len(mine) == 2 and any("'reasoning'" in p for p in mine)
    again = lint_cards(nanbeige.manifest, [CardText(artifact_id="fp8-dynamic", path=path, text=fresh.readme)],
                       inputs=nanbeige)
    assert not [p for p in again if "states no output throughput" in p]


def test_quant_headline_adds_the_tpot_based_decode_ratio_unless_bunched(nanbeige: CardInputs) -> None:
    """Issue 24: "decode" names only a TPOT-based figure. Beside the output-throughput ratio the headline gives the
    reference's TPOT over the quant's ("decode 1.44x, from TPOT"); a point whose TPOT measured bunched output (near
    zero) gives none rather than a meaningless ratio."""
    from dataclasses import replace

    from hfrelease.cards import entry_for
    from hfrelease.ledger.record import Metric

    card = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    line = next(line for line in card.readme.splitlines() if line.startswith("- Reasoning (thinking on): output"))
    ratio = round(1000 / 170 * 1.05, 3) / round(1000 / 244 * 1.05, 3)  # the synthetic records' TPOT medians
    assert line.endswith(f"; decode {ratio:.2f}{TIMES}, from TPOT")
    numbers = {row.id: row for row in card.numbers}
    assert len(numbers["speed.reasoning.fp8-dynamic.none.c1.decode_vs_reference"].records) == 2
    entries = []
    for entry in nanbeige.records:
        record = entry.record
        if (record.kind, record.artifact_id, record.subject_id, record.extra.get("speculative"),
                record.extra.get("concurrency")) == ("speed", "fp8-dynamic", "reasoning", "none", 1):
            record = record.model_copy(update={"metrics": {**record.metrics, "tpot_median_ms": Metric(value=0.01)}})
        entries.append(entry_for(record, {s.doc_id: s.score for s in record.samples}, record.samples))
    bunched = render_family(replace(nanbeige, records=tuple(entries)), plots=False, artifacts=["fp8-dynamic"])
    line = next(line for line in bunched.card("fp8-dynamic").readme.splitlines()
                if line.startswith("- Reasoning (thinking on): output"))
    assert "decode" not in line


def test_quant_speed_over_the_reference_carries_the_session_noise(nanbeige: CardInputs) -> None:
    """When the ledger holds an A/A group (one measurement recorded in two server sessions on one host), the
    ratio over the reference is given with its 95 % interval between sessions, not the repeats' range: the
    reference's reasoning point recorded again at 0.8x gives s = ln(1.25) / sqrt 2 over df 1 (t 12.7), so
    1.44x is "within session noise"."""
    import math

    from hfrelease.cards import entry_for
    from hfrelease.ledger.record import Metric

    records = [e.record for e in nanbeige.records]
    first = next(r for r in records if r.kind == "speed" and r.artifact_id == "bf16" and r.subject_id == "reasoning"
                 and r.extra.get("speculative", "none") == "none" and r.extra.get("concurrency", 1) == 1)
    metrics = {**first.metrics, "output_throughput": Metric(value=first.metrics["output_throughput"].value * 0.8)}
    again = first.model_copy(update={"metrics": metrics, "started_at": "2026-01-01T00:00:00+00:00"})
    inputs = CardInputs(manifest=nanbeige.manifest, sections=nanbeige.sections, files=nanbeige.files,
                        records=(*nanbeige.records, entry_for(again, {}, ())))
    card = render_family(inputs, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    sigma = math.log(1.25) / math.sqrt(2)
    half = 12.706205 * sigma * math.sqrt(2)
    ratio = 244 / 170
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    assert (f"output throughput {ratio:.2f}{TIMES} ({low:.2f}{DASH}{high:.2f} between sessions: within "
            "session noise) the reference's") in card.readme
    numbers = {row.id: row for row in card.numbers}
    assert numbers["speed.reasoning.fp8-dynamic.none.c1.vs_reference.sessions95.low"].text == f"{low:.2f}"


def test_a_card_rendered_since_an_earlier_release_pools_its_session_noise(nanbeige: CardInputs) -> None:
    """Rendered `--since` an earlier release, the card's speed judgments take the comparison's session noise (both
    ledgers' A/A groups) when it has more degrees of freedom than the card's own ledger (none here): the ratio over
    the reference gets an interval between sessions instead of the repeats' range."""
    import math
    from dataclasses import replace

    from hfrelease.compare.rows import FamilyComparison
    from hfrelease.speed.noise import SessionNoise

    noise = SessionNoise(sigma=0.1, df=4, groups=("a", "b", "c", "d"))
    changes = FamilyComparison(family="nanbeige", old_label="v1.2", new_label="v1.3", rows=(), one_sided=(),
                               noise=noise)
    card = render_family(replace(nanbeige, changes=changes), plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    ratio = 244 / 170
    half = 2.776445 * 0.1 * math.sqrt(2)
    assert (f"output throughput {ratio:.2f}{TIMES} ({ratio * math.exp(-half):.2f}{DASH}{ratio * math.exp(half):.2f} "
            "between sessions: within session noise) the reference's") in card.readme
