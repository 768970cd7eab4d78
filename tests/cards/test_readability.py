"""Issue 13's defects, each caught by a lint rule on the demo cards as main rendered them (fixtures/main_cards/),
and absent from the cards rendered now."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from card_fixtures import best_config

from hfrelease.cards import CardInputs, apply_changes, lint_cards, plan_changes, read_cards, render_family
from hfrelease.cards.card_text import CardText
from hfrelease.cards.lint.readability import MAX_TABLE_WIDTH, table_width, tables

MAIN = Path(__file__).resolve().parent / "fixtures" / "main_cards"


@pytest.fixture(scope="module")
def main_problems(demo_inputs: CardInputs) -> list[str]:
    """Every problem the lint finds in the cards main rendered (reference, quant, draft, unpublished draft)."""
    cards = [CardText(artifact_id=p.parent.name, path=p, text=p.read_text()) for p in sorted(MAIN.glob("*/README.md"))]
    return lint_cards(demo_inputs.manifest, cards)


@pytest.fixture(scope="module")
def fresh(demo_inputs: CardInputs, tmp_path_factory: pytest.TempPathFactory) -> list[CardText]:
    """The demo cards rendered now from the same ledger, written with their plots."""
    root = tmp_path_factory.mktemp("fresh")
    apply_changes(plan_changes(render_family(demo_inputs), root))
    found, problems = read_cards(demo_inputs.manifest, root)
    assert not problems
    return found


@pytest.mark.parametrize(("defect", "needle"), [
    ("the family table is 12 columns wide", "the Hub's card column shows at 1200 px"),
    ("a slowdown is headlined", "headlines a config slower than no speculation"),
    ("the draft card calls `draft` best where the reference card shows `ngram` faster",
     "the best config for Long-document copy on reference"),
    ("speed shows a median only", "without the spread of its repeats"),
    ("a zero-width interval says nothing", "has zero width without saying that every pair agrees"),
    ("a delta cell has no interval", "without its interval and n"),
    ("GB beside GiB", "never GB"),
    ("one date as a range", "names one date as a range"),
    ("the unpublished under-trained repo is linked", "a repo this release never publishes"),
    ("plots in fractions, ids for labels, no highlight, axes not from zero", "carries no plot description"),
    ("no base_model_relation on the draft", "base_model without base_model_relation"),
    ("model-index metric types are lm-eval keys", "is an lm-eval key, not a Hub metric id"),
    ("model-index values are fractions while the body shows points", "is not on the scale the card's tables print"),
    ("library_name transformers on an EAGLE-3 head", "library_name transformers on a eagle3 head"),
    ("the CFF author is encoded as a person", "is not a CFF entity"),
    ("BibTeX splits the organisation", "is not braced: BibTeX splits it"),
    ("the CFF describes the artifact but cites the family", "each artifact is cited as itself"),
])
def test_main_cards_show_each_defect(main_problems: list[str], defect: str, needle: str) -> None:
    """The lint reports this defect of main's demo cards."""
    assert any(needle in p for p in main_problems), defect


def test_fresh_cards_have_none_of_them(demo_inputs: CardInputs, fresh: list[CardText]) -> None:
    """The cards rendered now pass every rule, checked against the ledger."""
    assert lint_cards(demo_inputs.manifest, fresh, inputs=demo_inputs) == []


def test_every_table_fits_the_card_column(fresh: list[CardText]) -> None:
    """No table of any demo card is wider than the documented proxy of the Hub's column."""
    widths = [table_width(t) for c in fresh for t in tables(c.text)]
    assert widths and max(widths) <= MAX_TABLE_WIDTH


def test_width_proxy_counts_unbreakable_words_and_two_line_wraps() -> None:
    """A column needs its longest word (hyphens break) or half its widest cell, plus 3 of padding."""
    assert table_width([["abc def ghij"], ["x"]]) == 6 + 3  # half of 12 beats the 4-letter word
    assert table_width([["tiny-EAGLE3-untrained"]]) == 11 + 3  # breaks after hyphens: half of 21 wins
    assert table_width([["a", "bb"]]) == 1 + 3 + 2 + 3


def test_bunched_itl_is_caught(fresh: list[CardText], demo_inputs: CardInputs) -> None:
    """An ITL cell printed as 0.00 ms is a lint problem."""
    card = next(c for c in fresh if c.artifact_id == "reference")
    row = next(line for line in card.text.splitlines() if line.startswith("| `none` |"))
    cells = row.split("|")
    cells[4] = " 0.00 "
    bad = CardText(artifact_id=card.artifact_id, path=card.path, text=card.text.replace(row, "|".join(cells)))
    assert any("measures bunched output" in p for p in lint_cards(demo_inputs.manifest, [bad]))


def test_slower_config_marked_best_is_caught(fresh: list[CardText], demo_inputs: CardInputs) -> None:
    """A row marked best with a speedup below 1x is a lint problem."""
    card = next(c for c in fresh if c.artifact_id == "reference")
    # The draft's row on short chat, slower than no speculation (its speedup cell reads 0.xx times), marked best.
    row = next(line for line in card.text.splitlines()
               if line.startswith("| `draft` |") and line.split("|")[3].strip().startswith("0."))
    speedup = row.split("|")[3].strip()[:4]
    bad = CardText(artifact_id=card.artifact_id, path=card.path,
                   text=card.text.replace(row, row.rstrip().removesuffix("|").rstrip() + " best |"))
    assert any(f"is marked best at {speedup}" in p for p in lint_cards(demo_inputs.manifest, [bad]))


def test_draft_card_names_its_wins_and_gates(fresh: list[CardText]) -> None:
    """The draft card says which config wins each workload instead of headlining its own slowdown."""
    draft = next(c for c in fresh if c.artifact_id == "draft").text
    headline = draft.split("## Measured figures")[1].split("<!-- measured:end -->")[0]
    assert "Short chat: `none` is faster on reference" in headline
    # The config the reference's card calls best on Long-document copy (`suffix` on the recorded host) wins there.
    best = best_config(next(c for c in fresh if c.artifact_id == "reference").text, "Long-document copy")
    assert f"Long-document copy: `{best}` is faster on reference" in headline
    assert "Draft gates: pass" in headline
    assert "0.90" not in headline


def test_quality_plot_reads_like_the_tables(demo_inputs: CardInputs) -> None:
    """Points not fractions, titles not ids, this card highlighted, no unpublished artifact on a published card."""
    from hfrelease.cards.measurements import measure_family
    from hfrelease.cards.plots import plan_plots

    measured = measure_family(demo_inputs)
    manifest = demo_inputs.manifest
    plot = next(p for p in plan_plots(manifest, measured, manifest.artifact_by_id("fp8-dynamic"))
                if p.kind == "quality")
    panel = plot.panels[0]
    assert panel.ylabel == "delta (points)"
    assert "undertrained" not in plot.artifacts
    assert [s.label for s in panel.series if s.highlight] == ["hfrelease-demo tiny FP8-Dynamic (this card)"]
    assert all(s.label.startswith("hfrelease-demo tiny") for s in panel.series)
    own = next(p for p in plan_plots(manifest, measured, manifest.artifact_by_id("undertrained"))
               if p.kind == "quality")
    series = next(s for s in own.panels[0].series if s.highlight)
    # Points, as the quality table prints them: the delta of the card's first gate row.
    readme = render_family(demo_inputs, plots=False, artifacts=["undertrained"]).cards[0].readme
    first = manifest.gate[0].label
    printed = re.search(rf"\| {re.escape(first)} \| [\d.]+ \| [\d.]+ \| ([+-]\d+\.\d) \(CI", readme)
    assert printed, readme.split("## Quality evals")[1][:800]
    assert series.ys[0] == pytest.approx(float(printed.group(1)), abs=0.05)


def test_rendered_plot_carries_its_description(fresh: list[CardText], demo_inputs: CardInputs) -> None:
    """Each PNG says what it draws; a published card's plots pass the plot rules."""
    import json

    from hfrelease.cards.lint.plots import png_text
    from hfrelease.cards.plots import DESCRIPTION

    card = next(c for c in fresh if c.artifact_id == "fp8-dynamic")
    load = json.loads(png_text((card.path.parent / "plots" / "load.png").read_bytes())[DESCRIPTION])
    assert load["zero_based"] and load["panels"][1]["ylabel"] == "ITL median ms"
    assert load["panels"][0]["series"] == ["Chat under load, none"]


def test_eval_results_outside_the_schema_are_caught(fresh: list[CardText], demo_inputs: CardInputs) -> None:
    """An .eval_results file with a key the Hub's schema lacks, or a fraction beside points, is a lint problem."""
    card = next(c for c in fresh if c.artifact_id == "fp8-dynamic")
    folder = card.path.parent / ".eval_results"
    folder.mkdir()
    try:
        (folder / "a.yaml").write_text("- dataset: {id: Idavidrein/gpqa, task_id: diamond}\n  value: 99.0\n"
                                       "  metric: acc\n")
        (folder / "b.yaml").write_text("- dataset: {id: Idavidrein/gpqa, task_id: diamond}\n  value: 0.99\n")
        problems = lint_cards(demo_inputs.manifest, [card])
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    assert any("a.yaml: not the Hub's .eval_results schema" in p for p in problems)
    assert any("b.yaml: value 0.99 is not on the scale" in p for p in problems)


def test_metadata_per_kind(fresh: list[CardText]) -> None:
    """Every kind names its relation; a head's library is vLLM; model-index uses Hub metric ids in points."""
    from huggingface_hub import ModelCard

    data = {c.artifact_id: ModelCard(c.text).data.to_dict() for c in fresh}
    assert data["fp8-dynamic"]["base_model_relation"] == "quantized"
    assert data["undertrained"]["base_model_relation"] == "finetune"
    assert data["draft"]["base_model_relation"] == "adapter"
    assert data["eagle3-untrained"]["library_name"] == "vllm"
    assert data["draft"]["library_name"] == "transformers"
    metric = data["fp8-dynamic"]["model-index"][0]["results"][0]["metrics"][0]
    assert (metric["type"], metric["value"], metric["name"]) == ("exact_match", 99.0, "exact match (answer)")


def _edit_record(inputs: CardInputs, name_part: str, change: dict[str, object]) -> CardInputs:
    """The same ledger with one speed record's metrics/extra updated (`change` keys: metrics, extra)."""
    from dataclasses import replace

    from hfrelease.cards import entry_for
    from hfrelease.ledger.record import Metric

    entries = []
    for entry in inputs.records:
        record = entry.record
        if name_part in entry.name:
            metrics = {**record.metrics, **{k: Metric(value=v) for k, v in change.get("metrics", {}).items()}}
            record = record.model_copy(update={"metrics": metrics, "extra": {**record.extra,
                                                                               **change.get("extra", {})}})
        entries.append(entry_for(record, entry.scores, entry.samples))
    return replace(inputs, records=tuple(entries))


def _longdoc_none(inputs: CardInputs) -> str:
    """The name part (kind, workload, input key) shared by the reference's batch-1 long-document records without
    speculation: every session's record of that point."""
    [key] = {e.record.input_key[:12] for e in inputs.records
             if e.record.kind == "speed" and e.record.artifact_id == "reference" and e.record.subject_id == "longdoc"
             and e.record.extra.get("speculative") in (None, "none") and e.record.extra.get("concurrency") == 1}
    return f"speed-longdoc-{key}"


def test_bunched_itl_is_not_printed_as_a_number(demo_inputs: CardInputs) -> None:
    """An ITL median of 0.00 ms beside an honest TPOT (output in bunched chunks) prints as n/a with a note."""
    inputs = _edit_record(demo_inputs, _longdoc_none(demo_inputs), {
        "metrics": {"itl_median_ms": 0.0004},
        "extra": {"spread": {"output_throughput": [358.2, 385.0], "itl_median_ms": [0.0, 2.4]}}})
    readme = render_family(inputs, plots=False, artifacts=["reference"]).cards[0].readme
    row = next(line for line in readme.split("### Long-document copy")[1].splitlines() if line.startswith("| `none`"))
    assert "n/a (bunched)" in row and "0.00" not in row
    assert "arrived in bunched chunks" in readme


def test_no_best_without_a_baseline(demo_inputs: CardInputs) -> None:
    """Without a point served without speculation, no config is called best or headlined as fastest."""
    dropped = (_longdoc_none(demo_inputs), "speed-best-longdoc")  # the none point and the recorded choice
    inputs = CardInputs(manifest=demo_inputs.manifest, sections=demo_inputs.sections,
                        records=tuple(e for e in demo_inputs.records if not any(d in e.name for d in dropped)))
    readme = render_family(inputs, plots=False, artifacts=["reference"]).cards[0].readme
    section = readme.split("### Long-document copy")[1].split("###")[0]
    assert "no best config (nothing measured without speculation to compare with)" in section
    assert "| best |" not in section
    assert "Long-document copy:" not in readme.split("## Measured figures")[1].split("<!-- measured:end -->")[0]


def test_a_single_run_passes_the_lint(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """A speed point measured once says "(n = 1)", and that count traces to its record like every number; a
    speedup over it prints no range either (issue 24: "1.69x (1.69-1.69)" showed one run as a spread)."""
    from dataclasses import replace

    name = _longdoc_none(demo_inputs)
    # One session of the point: its other sessions' records (the A/A groups of session noise) left out.
    sessions = sorted((e for e in demo_inputs.records if name in e.name), key=lambda e: e.record.started_at)
    kept = replace(demo_inputs, records=tuple(e for e in demo_inputs.records if e not in sessions[:-1]))
    inputs = _edit_record(kept, name, {"extra": {"repeats": 1}})
    rendered = render_family(inputs)
    readme = rendered.card("reference").readme
    section = readme.split("### Long-document copy")[1].split("###")[0]
    tps = sessions[-1].record.metrics["output_throughput"].value
    assert f"{tps:.1f} (n = 1) | baseline |" in section
    rows = {line.split("|")[1].strip(): line.split("|") for line in section.splitlines() if line.startswith("| `")}
    for config in ("`ngram`", "`draft`"):
        assert rows[config][3].strip().endswith("\u00d7 (n = 1)"), rows[config]  # a speedup over one run: no range
        assert "\u2013" in rows[config][2]  # the speculative point's own repeats keep their range
    apply_changes(plan_changes(rendered, tmp_path))
    cards, problems = read_cards(inputs.manifest, tmp_path)
    assert problems == [] and lint_cards(inputs.manifest, cards, inputs=inputs) == []


def test_a_by_position_cell_of_many_positions_keeps_the_table_inside_the_column() -> None:
    """Suffix decoding drafts up to 8 tokens: all 8 figures with intervals made the demo's acceptance table about
    123 characters wide. Beyond four positions the cell shows three, an ellipsis and the last;
    up to four, every one."""
    from hfrelease.cards.draft_tables import positions_cell
    from hfrelease.cards.lint.readability import MAX_TABLE_WIDTH, table_width

    figures = [f"0.{90 - i:02d} (0.{80 - i:02d}\u20130.{95 - i:02d})" for i in range(8)]
    assert positions_cell(figures[:4]) == " / ".join(figures[:4])
    cell = positions_cell(figures)
    assert cell == " / ".join([*figures[:3], "\u2026", f"{figures[7]} (last)"])
    rows = [["Workload and config", "Acceptance rate", "Mean acceptance length", "By position (0, 1, ...)"],
            ["Long-document copy, suffix", "0.98 (0.95\u20131.00)", "6.75", cell]]
    assert table_width(rows) <= MAX_TABLE_WIDTH
    assert table_width([rows[0], [*rows[1][:3], " / ".join(figures)]]) > MAX_TABLE_WIDTH  # what it replaces
