"""The card's plots as data (`plan_plots`, pure and cheap) and as PNG bytes (`draw`, matplotlib).

matplotlib is imported inside `draw` (it costs ~0.3 s) and used through its object API with the Agg
canvas, never pyplot: no global figure state, nothing opens a window, and PNGs carry no timestamp or
software version (metadata stripped), so an unchanged ledger re-renders byte-identical plots.

What a reader needs from a plot, and the lint checks (each PNG carries a `hfrelease-plot` text chunk
describing it, `DESCRIPTION`): the tables' units (quality deltas in points for percentage metrics, as the
tables print them, never fractions); series named by their labels and titles, never ids; every value axis
from zero (a 4 % rise of latency drawn on an 8.50-8.86 ms axis looks like a spike), the delta axis with
its zero line; this card's artifact highlighted; on a published card, no artifact the release does not
publish (an unpublished regression fixture would set the scale and squash the published quants).

And it says what the tables say (issue 25): an inter-token latency the load table refuses as bunched
("n/a (bunched)": tokens delivered in one chunk, `speed_tables._bunched`) is left out of the plot too, a gap,
not a point; a median of repeats carries the repeats' range as an error bar, as the table prints it in
brackets; series the tables print identically (at the tables' two decimals) are drawn once, labelled with
every series they stand for (a draft accepted alike beside three targets is one line, not three on top of
each other); and a plot is drawn only where its table is (`context.build_context`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from hfrelease.cards.measurements import NONE, FamilyMeasurements, SpeedPoint
from hfrelease.cards.speed_tables import _bunched as bunched  # the load table's own rule, so the two agree
from hfrelease.manifest import Artifact, Manifest

DESCRIPTION = "hfrelease-plot"  # the PNG text chunk that describes a plot to the lint


@dataclass(frozen=True, kw_only=True)
class Series:
    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    lows: tuple[float, ...] | None = None  # interval bounds (quality deltas) or the repeats' range (speed)
    highs: tuple[float, ...] | None = None
    highlight: bool = False  # this card's artifact


@dataclass(frozen=True, kw_only=True)
class Panel:
    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...]
    style: str = "line"  # line | interval
    xticks: tuple[str, ...] | None = None  # category labels at x = 0, 1, ...


@dataclass(frozen=True, kw_only=True)
class PlotData:
    kind: str  # load | acceptance | quality
    path: str  # relative to the card directory
    alt: str
    panels: tuple[Panel, ...]
    artifacts: tuple[str, ...] = ()  # the artifact ids whose measurements it draws

    def description(self) -> str:
        """What the lint reads back from the PNG: units, labels, zero, highlight, artifacts drawn, and each
        series' values (null where a point is left out) and whether it carries ranges."""
        return json.dumps({
            "kind": self.kind, "artifacts": list(self.artifacts), "zero_based": True,
            "panels": [{"ylabel": p.ylabel, "series": [s.label for s in p.series],
                        "highlight": [s.label for s in p.series if s.highlight],
                        "values": [[round(y, 4) if math.isfinite(y) else None for y in s.ys] for s in p.series],
                        "ranges": [s.lows is not None for s in p.series], "style": p.style} for p in self.panels],
        }, sort_keys=True)


def plan_plots(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> list[PlotData]:
    """The plots `artifact`'s card shows, given what was measured (no plot without data)."""
    # a draft card has no quality table
    quality = _quality(manifest, measured, artifact) if artifact.kind != "draft" else None
    return [p for p in (_load(manifest, measured, artifact), _acceptance(manifest, measured, artifact), quality)
            if p is not None]


def _shown(manifest: Manifest, card: Artifact, other: Artifact) -> bool:
    # The same rule as the card's tables (context._View.shown): a published card draws no unpublished artifact.
    sources = {a.source.hub for a in manifest.artifact if a.source.hub} | {manifest.family.base_model}
    return other.publish or other.repo in sources or not card.publish or other.id == card.id


def _point_label(manifest: Manifest, p: SpeedPoint, *, with_artifact: bool) -> str:
    label = f"{p.workload.label or p.workload.id}, {p.speculative}"
    if with_artifact:
        served = manifest.artifact_by_id(p.artifact_id)
        label += f" on {served.title or served.repo}"
    return label


def _points_of(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> list[SpeedPoint]:
    points = (measured.points(draft_id=artifact.id) if artifact.kind == "draft"
              else measured.points(artifact_id=artifact.id))
    return [p for p in points if p.entry.record.draft_artifact_id is None
            or _shown(manifest, artifact, manifest.artifact_by_id(p.entry.record.draft_artifact_id))]


def _load(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> PlotData | None:
    grouped: dict[tuple[str, str, str], list[SpeedPoint]] = {}
    for p in _points_of(manifest, measured, artifact):
        grouped.setdefault((p.workload.id, p.artifact_id, p.speculative), []).append(p)
    throughput, itl = [], []
    for points in grouped.values():
        if len({p.concurrency for p in points}) < 2:
            continue
        points.sort(key=lambda p: p.concurrency)
        label = _point_label(manifest, points[0], with_artifact=artifact.kind == "draft")
        xs = tuple(float(p.concurrency) for p in points)
        throughput.append(_ranged(label, xs, points, "output_throughput", lambda p: p.throughput))
        itl.append(_ranged(label, xs, points, "itl_median_ms", _itl))
    if not throughput:
        return None
    return PlotData(kind="load", path="plots/load.png", alt="Throughput and inter-token latency against concurrency",
                    panels=(Panel(title="Output throughput", xlabel="concurrency", ylabel="output tok/s",
                                  series=tuple(throughput)),
                            Panel(title="Inter-token latency (median)", xlabel="concurrency", ylabel="ITL median ms",
                                  series=tuple(itl))),
                    artifacts=tuple(sorted({k[1] for k in grouped})))


def _itl(p: SpeedPoint) -> float:
    """The median ITL as the load table prints it: NaN (a gap) where absent or bunched ("n/a (bunched)")."""
    if "itl_median_ms" not in p.metrics or bunched(p, "itl_median_ms"):
        return float("nan")
    return p.metrics["itl_median_ms"]


def _ranged(label: str, xs: tuple[float, ...], points: list[SpeedPoint], name: str,
            value: Callable[[SpeedPoint], float]) -> Series:
    """A speed series whose points carry their repeats' range (`extra.spread`), as the table's brackets do; a
    point with one repeat, or none recorded, has a bar of zero length."""
    ys = tuple(value(p) for p in points)
    ranges = [_spread(p, name) for p in points]
    if not any(ranges):
        return Series(label=label, xs=xs, ys=ys)
    lows = tuple(r[0] if r and math.isfinite(y) else y for r, y in zip(ranges, ys, strict=True))
    highs = tuple(r[1] if r and math.isfinite(y) else y for r, y in zip(ranges, ys, strict=True))
    return Series(label=label, xs=xs, ys=ys, lows=lows, highs=highs)


def _spread(p: SpeedPoint, name: str) -> tuple[float, float] | None:
    spread = p.entry.record.extra.get("spread")
    pair = spread.get(name) if isinstance(spread, dict) else None
    values = [float(v) for v in pair if isinstance(v, int | float)] if isinstance(pair, list) else []
    return (min(values), max(values)) if len(values) == 2 else None


def collapse(series: list[Series], places: int = 2) -> list[Series]:
    """Series whose values the tables print alike (rounded to `places`) drawn once, under one label naming
    them all ("Short chat, draft on A, B and C"); the first's place in the legend is kept."""
    groups: dict[tuple[tuple[float, ...], tuple[float, ...]], list[Series]] = {}
    for s in series:
        key = (s.xs, tuple(round(y, places) if math.isfinite(y) else math.inf for y in s.ys))
        groups.setdefault(key, []).append(s)
    merged = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            merged.append(first)
            continue
        merged.append(Series(label=_joined([m.label for m in members]), xs=first.xs, ys=first.ys, lows=first.lows,
                             highs=first.highs, highlight=any(m.highlight for m in members)))
    return merged


def _joined(labels: list[str]) -> str:
    """One legend label for series drawn once: "X on A", "X on B" -> "X on A and B" (every workload on every
    target named: the labels are all such pairs), a few others joined with "; ", many said by their count (the
    table beside the plot lists each)."""
    pairs = [label.rpartition(" on ") for label in labels]
    heads = list(dict.fromkeys(head for head, _, _ in pairs))
    tails = list(dict.fromkeys(tail for _, _, tail in pairs))
    if all(sep for _, sep, _ in pairs) and len(heads) * len(tails) == len(labels):
        return f"{' / '.join(heads)} on {_and(tails)}"
    if len(labels) <= 3:
        return "; ".join(labels)
    return f"{labels[0]} and {len(labels) - 1} more series with the same values (the table lists each)"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _acceptance(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> PlotData | None:
    series, drawn = [], set()
    for p in _points_of(manifest, measured, artifact):
        if p.speculative == NONE or p.concurrency != 1 or not p.positions():
            continue
        positions = p.positions()
        label = _point_label(manifest, p, with_artifact=artifact.kind == "draft")
        series.append(Series(label=label, xs=tuple(float(i) for i, _ in positions), ys=tuple(v for _, v in positions)))
        drawn.add(p.artifact_id)
    if not series:
        return None
    return PlotData(kind="acceptance", path="plots/acceptance.png", alt="Acceptance rate by draft position",
                    panels=(Panel(title="Acceptance by draft position (batch-1)", xlabel="draft position",
                                  ylabel="acceptance rate (accepted / drafts)", series=tuple(collapse(series))),),
                    artifacts=tuple(sorted(drawn)))


def _quality(manifest: Manifest, measured: FamilyMeasurements, card: Artifact) -> PlotData | None:
    gates = [g for g in manifest.gate if not g.is_fidelity]  # fidelity has its own section, not deltas
    # The tables' units: points for a gate whose values are all fractions, the metric's own units otherwise.
    percent = {g.id: bool(values) and all(0.0 <= v <= 1.0 for v in values)
               for g in gates for values in [[r.value for (_, gid), r in measured.gates.items()
                                              if gid == g.id and r.value is not None]]}
    series, drawn = [], []
    for other in manifest.artifact:
        if not _shown(manifest, card, other):
            continue
        found = [(i, measured.gate(other.id, g.id)) for i, g in enumerate(gates)]
        chosen = [(i, r.comparison, 100.0 if percent[gates[i].id] else 1.0) for i, r in found
                  if r is not None and r.comparison is not None]
        if not chosen:
            continue
        title = other.title or other.repo
        series.append(Series(label=title + (" (this card)" if other.id == card.id else ""),
                             xs=tuple(float(i) for i, _, _ in chosen),
                             ys=tuple(c.delta * k for _, c, k in chosen),
                             lows=tuple(c.ci_low * k for _, c, k in chosen),
                             highs=tuple(c.ci_high * k for _, c, k in chosen), highlight=other.id == card.id))
        drawn.append(other.id)
    if not series:
        return None
    units = "points" if all(percent.values()) else "points (percent metrics) or metric units"
    return PlotData(kind="quality", path="plots/quality-deltas.png",
                    alt="Quality delta against the reference, in points, with 95% intervals, per gate",
                    panels=(Panel(title="Delta vs the reference (95% paired-bootstrap CI)", xlabel="gate",
                                  ylabel=f"delta ({units})", series=tuple(series), style="interval",
                                  xticks=tuple(g.label or g.id for g in gates)),),
                    artifacts=tuple(drawn))


def _plain(text: str) -> str:
    # matplotlib reads $...$ as mathtext: a label from a manifest must print literally.
    return text.replace("\\", "/").replace("$", r"\$")


def draw(plot: PlotData) -> bytes:
    """The plot as PNG bytes."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A legend under the axes (long labels) needs the height its lines take.
    lines = sum(len(s.label) // 70 + 1 for p in plot.panels for s in p.series if len(s.label) > 40)
    figure = Figure(figsize=(5.2 * len(plot.panels), 3.4 + 0.14 * lines), dpi=90, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(plot.panels), squeeze=False)[0]
    for ax, panel in zip(axes, plot.panels, strict=True):
        count = len(panel.series)
        for index, s in enumerate(panel.series):
            if panel.style == "interval":
                assert s.lows is not None and s.highs is not None
                offset = (index - (count - 1) / 2) * 0.8 / max(count, 1)
                xs = [x + offset for x in s.xs]
                errors = [[y - lo for y, lo in zip(s.ys, s.lows, strict=True)],
                          [hi - y for y, hi in zip(s.ys, s.highs, strict=True)]]
                # This card's artifact stands out; the others stay readable but recede.
                ax.errorbar(xs, s.ys, yerr=errors, fmt="D" if s.highlight else "o", capsize=3,
                            markersize=7 if s.highlight else 4, elinewidth=2 if s.highlight else 1,
                            alpha=1.0 if s.highlight or not any(t.highlight for t in panel.series) else 0.45,
                            zorder=3 if s.highlight else 2, label=_plain(s.label))
            elif s.lows is not None and s.highs is not None:
                # The repeats' range, as the tables print it in brackets; NaN (a bunched ITL) stays a gap.
                errors = [[max(0.0, y - lo) if math.isfinite(y) else 0.0 for y, lo in zip(s.ys, s.lows, strict=True)],
                          [max(0.0, hi - y) if math.isfinite(y) else 0.0 for y, hi in zip(s.ys, s.highs, strict=True)]]
                ax.errorbar(s.xs, s.ys, yerr=errors, marker="o", capsize=3, linewidth=2.2 if s.highlight else 1.5,
                            label=_plain(s.label))
            else:
                ax.plot(s.xs, s.ys, marker="o", linewidth=2.2 if s.highlight else 1.5, label=_plain(s.label))
        if panel.style == "interval":
            ax.axhline(0.0, color="grey", linewidth=0.8)  # zero: no difference from the reference
            low = min([0.0, *(v for s in panel.series for v in (s.lows or s.ys))])
            high = max([0.0, *(v for s in panel.series for v in (s.highs or s.ys))])
            pad = max(1.0, (high - low) * 0.08)
            ax.set_ylim(low - pad, high + pad)
        else:
            # Value axes start at zero, so a few percent of change looks like a few percent.
            tops = (v for s in panel.series for v in (*s.ys, *(s.highs or ())) if math.isfinite(v))
            ax.set_ylim(bottom=0.0, top=max([1.0, *tops]) * 1.1)
        if panel.xticks is not None:
            ax.set_xticks(range(len(panel.xticks)), [_plain(t) for t in panel.xticks], rotation=20, fontsize=8)
        elif panel.xlabel == "concurrency":
            ax.set_xscale("log", base=2)
            ticks = sorted({x for s in panel.series for x in s.xs})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        elif panel.xlabel == "draft position":
            ticks = sorted({x for s in panel.series for x in s.xs})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_title(_plain(panel.title), fontsize=10)
        ax.set_xlabel(_plain(panel.xlabel))
        ax.set_ylabel(_plain(panel.ylabel))
        ax.grid(True, alpha=0.3)
        if max((len(s.label) for s in panel.series), default=0) > 40:
            # Long labels (series drawn once for several targets) go under the axes, wrapped, not over the lines.
            import textwrap

            handles, texts = ax.get_legend_handles_labels()
            ax.legend(handles, [textwrap.fill(t, 70) for t in texts], fontsize=7, loc="upper center",
                      bbox_to_anchor=(0.5, -0.2))
        else:
            ax.legend(fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None, DESCRIPTION: plot.description()})
    return buffer.getvalue()
