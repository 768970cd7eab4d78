"""Plots say what the tables say (issue 25, part 5): a bunched inter-token latency left out as the load table
leaves it out, the repeats' range as error bars, series the tables print alike drawn once, and no plot
without its table. Planted data over the recorded demo ledger and the Nanbeige inputs; no server."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from hfrelease.cards import CardInputs, render_family
from hfrelease.cards.inputs import RecordEntry
from hfrelease.cards.measurements import measure_family
from hfrelease.cards.plots import PlotData, plan_plots
from hfrelease.ledger.record import Metric


def _bunch(entry: RecordEntry) -> RecordEntry:
    """The load record at concurrency 8 as a run whose tokens came bunched: repeats' median ITL 0.006 ms and
    11.48 ms (median 5.74, what the flagship's load plot drew), TPOT 11.5 ms."""
    record = entry.record
    if record.kind != "speed" or record.extra.get("concurrency") != 8:
        return entry
    metrics = {**record.metrics, "itl_median_ms": Metric(value=5.743), "tpot_median_ms": Metric(value=11.5)}
    spread = {**record.extra["spread"], "itl_median_ms": [0.006, 11.48]}  # type: ignore[dict-item]
    return replace(
        entry, record=record.model_copy(update={"metrics": metrics, "extra": {**record.extra, "spread": spread}})
    )


@pytest.fixture(scope="module")
def bunched(demo_inputs: CardInputs) -> CardInputs:
    return replace(demo_inputs, records=tuple(_bunch(e) for e in demo_inputs.records))


def _panels(plot: PlotData) -> dict[str, dict[str, Any]]:
    return {p["ylabel"]: p for p in json.loads(plot.description())["panels"]}


def test_the_load_plot_leaves_out_the_itl_the_table_refuses(bunched: CardInputs) -> None:
    """The table prints n/a (bunched) at concurrency 8; the plot draws no ITL there (a gap), not 5.74 ms."""
    card = render_family(bunched, plots=False, artifacts=["fp8-dynamic"]).cards[0]
    row = next(line for line in card.readme.splitlines() if line.startswith("| 8 |"))
    assert "n/a (bunched)" in row
    manifest = bunched.manifest
    [load] = [
        p
        for p in plan_plots(manifest, measure_family(bunched), manifest.artifact_by_id("fp8-dynamic"))
        if p.kind == "load"
    ]
    itl = _panels(load)["ITL median ms"]["values"][0]
    assert itl[3] is None  # concurrency 8, bunched
    # The other points are drawn as recorded (a point the table also refuses, bunched in the real run, is a gap).
    recorded = {round(e.record.metrics["itl_median_ms"].value, 4) for e in bunched.records
                if e.record.kind == "speed" and e.record.artifact_id == "fp8-dynamic"
                and e.record.subject_id == "load" and "itl_median_ms" in e.record.metrics}
    drawn = [v for v in itl[:3] if v is not None]
    assert drawn and all(round(v, 4) in recorded for v in drawn)


def test_load_points_carry_the_repeats_range(demo_inputs: CardInputs) -> None:
    """Each median drawn carries its repeats' range (the table's brackets) as an error bar."""
    manifest = demo_inputs.manifest
    [load] = [
        p
        for p in plan_plots(manifest, measure_family(demo_inputs), manifest.artifact_by_id("fp8-dynamic"))
        if p.kind == "load"
    ]
    throughput = load.panels[0].series[0]
    assert throughput.lows is not None and throughput.highs is not None
    assert all(lo <= y <= hi for lo, y, hi in zip(throughput.lows, throughput.ys, throughput.highs, strict=True))
    assert any(hi > lo for lo, hi in zip(throughput.lows, throughput.highs, strict=True))
    assert all(_panels(load)[p]["ranges"] == [True] for p in ("output tok/s", "ITL median ms"))


def test_series_the_tables_print_alike_are_drawn_once(nanbeige: CardInputs) -> None:
    """The EAGLE-3 head's acceptance plot: nine series with the same acceptance by position (a head accepted
    alike on every target and workload) are one line, labelled as such; the two that differ stay apart."""
    manifest = nanbeige.manifest
    measured = measure_family(nanbeige)
    [plot] = [p for p in plan_plots(manifest, measured, manifest.artifact_by_id("eagle3")) if p.kind == "acceptance"]
    series = plot.panels[0].series
    assert len(series) == 3
    assert "and 8 more series with the same values" in series[0].label
    values = [tuple(round(y, 2) for y in s.ys) for s in series]
    assert len(set(values)) == len(values)


def test_no_plot_without_its_table(demo_inputs: CardInputs, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load plot planned for a card whose load section shows no table (the reference has no concurrency
    sweep) is neither shown nor written into plots/."""
    from hfrelease.cards import context
    from hfrelease.cards.plots import Panel, Series

    planned = context.plan_plots

    def with_a_stray_load_plot(*args: Any) -> list[PlotData]:
        stray = PlotData(
            kind="load",
            path="plots/load.png",
            alt="stray",
            panels=(
                Panel(
                    title="t",
                    xlabel="concurrency",
                    ylabel="output tok/s",
                    series=(Series(label="Short chat, none", xs=(1.0, 2.0), ys=(1.0, 2.0)),),
                ),
            ),
        )
        return [*planned(*args), stray]

    monkeypatch.setattr(context, "plan_plots", with_a_stray_load_plot)
    card = render_family(demo_inputs, artifacts=["reference"]).cards[0]
    assert "plots/load.png" not in card.files and "(plots/load.png)" not in card.readme
    assert "plots/quality-deltas.png" in card.files  # the plots with their tables stay
