"""The plot lint enforces what the tables say (issue 25, part 5): each planted bad card fails one rule, the
fresh render passes them all."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hfrelease.cards import CardInputs, apply_changes, lint_cards, plan_changes, read_cards, render_family
from hfrelease.cards.card_text import CardText
from hfrelease.cards.plots import Panel, PlotData, Series, draw


@pytest.fixture(scope="module")
def rendered(demo_inputs: CardInputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plots")
    apply_changes(plan_changes(render_family(demo_inputs), root))
    return root


@pytest.fixture
def card(rendered: Path, tmp_path: Path) -> CardText:
    """A copy of the fresh fp8-dynamic card (README and plots) to plant a defect in."""
    shutil.copytree(rendered / "fp8-dynamic", tmp_path / "fp8-dynamic")
    path = tmp_path / "fp8-dynamic" / "README.md"
    return CardText(artifact_id="fp8-dynamic", path=path, text=path.read_text())


def _plot_problems(demo_inputs: CardInputs, card: CardText, text: str | None = None) -> list[str]:
    if text is not None:
        card.path.write_text(text)
        card = CardText(artifact_id=card.artifact_id, path=card.path, text=text)
    return [p for p in lint_cards(demo_inputs.manifest, [card]) if "plots/" in p]


def test_the_fresh_render_passes_the_plot_rules(demo_inputs: CardInputs, rendered: Path) -> None:
    found, problems = read_cards(demo_inputs.manifest, rendered)
    assert not problems
    assert [p for p in lint_cards(demo_inputs.manifest, found) if "plots/" in p] == []


def test_a_plot_the_card_does_not_show_is_a_problem(demo_inputs: CardInputs, card: CardText) -> None:
    (card.path.parent / "plots" / "sweep.png").write_bytes((card.path.parent / "plots" / "load.png").read_bytes())
    assert any(
        "plots/sweep.png is in plots/ but the card does not show it" in p for p in _plot_problems(demo_inputs, card)
    )


def test_a_plot_outside_its_tables_section_is_a_problem(demo_inputs: CardInputs, card: CardText) -> None:
    text = card.text.replace(
        "![Throughput and inter-token latency against concurrency, both axes from zero](plots/load.png)", ""
    )
    text += "\n## Notes\n\n![Load](plots/load.png)\n"
    assert any(
        "plots/load.png is shown in a section without its measured table" in p
        for p in _plot_problems(demo_inputs, card, text)
    )


def test_a_plotted_itl_the_table_refuses_as_bunched_is_a_problem(demo_inputs: CardInputs, card: CardText) -> None:
    """The table says n/a (bunched) at concurrency 8; the plot (rendered before) still draws 8.86 ms there."""
    row = next(line for line in card.text.splitlines() if line.startswith("| 8 |"))
    cells = row.split(" | ")
    cells[2] = "n/a (bunched)"
    text = card.text.replace(row, " | ".join(cells))
    assert any(
        "plots/load.png draws 1 inter-token latencies the table refuses as bunched" in p
        for p in _plot_problems(demo_inputs, card, text)
    )


XS = (1.0, 2.0, 4.0, 8.0)


def _plant_load_plot(card: CardText, *panels: tuple[str, tuple[Series, ...]]) -> None:
    """Replace the card's load plot with one drawing these (ylabel, series) panels."""
    plot = PlotData(
        kind="load",
        path="plots/load.png",
        alt="load",
        artifacts=("fp8-dynamic",),
        panels=tuple(Panel(title=y, xlabel="concurrency", ylabel=y, series=s) for y, s in panels),
    )
    (card.path.parent / plot.path).write_bytes(draw(plot))


def test_medians_without_the_ranges_the_table_prints_are_a_problem(demo_inputs: CardInputs, card: CardText) -> None:
    _plant_load_plot(
        card,
        ("output tok/s", (Series(label="Chat under load, none", xs=XS, ys=(96.0, 183.0, 327.0, 504.0)),)),
        ("ITL median ms", (Series(label="Chat under load, none", xs=XS, ys=(8.5, 8.5, 8.5, 8.9)),)),
    )
    problems = _plot_problems(demo_inputs, card)
    assert any("plots/load.png draws medians without the repeats' range" in p for p in problems)


def test_two_series_with_the_same_values_are_a_problem(demo_inputs: CardInputs, card: CardText) -> None:
    """Two lines the table prints alike (8.50 and 8.50 at two decimals) drawn as two series."""
    _plant_load_plot(
        card,
        (
            "ITL median ms",
            (
                Series(label="Chat under load, none on A", xs=XS, ys=(8.5, 8.5, 8.5, 8.9)),
                Series(label="Chat under load, none on B", xs=XS, ys=(8.501, 8.5, 8.5, 8.9)),
            ),
        ),
    )
    assert any("as two series with the same values" in p for p in _plot_problems(demo_inputs, card))
