"""The card's plots as data (`plan_plots`, pure and cheap) and as PNG bytes (`draw`, matplotlib).

matplotlib is imported inside `draw` (it costs ~0.3 s) and used through its object API with the Agg
canvas, never pyplot: no global figure state, nothing opens a window, and PNGs carry no timestamp or
software version (metadata stripped), so an unchanged ledger re-renders byte-identical plots.
"""

from __future__ import annotations

from dataclasses import dataclass

from hfrelease.cards.measurements import NONE, FamilyMeasurements, SpeedPoint
from hfrelease.manifest import Artifact, Manifest


@dataclass(frozen=True, kw_only=True)
class Series:
    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    lows: tuple[float, ...] | None = None  # interval bounds (quality deltas)
    highs: tuple[float, ...] | None = None


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


def plan_plots(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> list[PlotData]:
    """The plots `artifact`'s card shows, given what was measured (no plot without data)."""
    quality = _quality(manifest, measured) if artifact.kind != "draft" else None  # a draft card has no quality table
    return [p for p in (_load(manifest, measured, artifact), _acceptance(measured, artifact), quality) if p is not None]


def _points_of(measured: FamilyMeasurements, artifact: Artifact) -> list[SpeedPoint]:
    if artifact.kind == "draft":
        return measured.points(draft_id=artifact.id)
    return measured.points(artifact_id=artifact.id)


def _load(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> PlotData | None:
    grouped: dict[tuple[str, str, str], list[SpeedPoint]] = {}
    for p in _points_of(measured, artifact):
        grouped.setdefault((p.workload.id, p.artifact_id, p.speculative), []).append(p)
    throughput, itl = [], []
    for (workload_id, artifact_id, spec), points in grouped.items():
        if len({p.concurrency for p in points}) < 2:
            continue
        points.sort(key=lambda p: p.concurrency)
        label = f"{workload_id} / {spec}" + (f" / {artifact_id}" if artifact.kind == "draft" else "")
        xs = tuple(float(p.concurrency) for p in points)
        throughput.append(Series(label=label, xs=xs, ys=tuple(p.throughput for p in points)))
        itl.append(Series(label=label, xs=xs, ys=tuple(p.metrics.get("itl_median_ms", float("nan")) for p in points)))
    if not throughput:
        return None
    return PlotData(kind="load", path="plots/load.png", alt="Throughput and inter-token latency against concurrency",
                    panels=(Panel(title="Output throughput", xlabel="concurrency", ylabel="tok/s",
                                  series=tuple(throughput)),
                            Panel(title="Inter-token latency (median)", xlabel="concurrency", ylabel="ms",
                                  series=tuple(itl))))


def _acceptance(measured: FamilyMeasurements, artifact: Artifact) -> PlotData | None:
    series = []
    for p in _points_of(measured, artifact):
        if p.speculative == NONE or p.concurrency != 1 or not p.positions():
            continue
        positions = p.positions()
        label = f"{p.workload.id} / {p.speculative}" + (f" / {p.artifact_id}" if artifact.kind == "draft" else "")
        series.append(Series(label=label, xs=tuple(float(i) for i, _ in positions), ys=tuple(v for _, v in positions)))
    if not series:
        return None
    return PlotData(kind="acceptance", path="plots/acceptance.png", alt="Acceptance rate by draft position",
                    panels=(Panel(title="Acceptance by draft position (batch-1)", xlabel="draft position",
                                  ylabel="accepted / drafts", series=tuple(series)),))


def _quality(manifest: Manifest, measured: FamilyMeasurements) -> PlotData | None:
    gates = [g for g in manifest.gate]
    series = []
    for other in manifest.artifact:
        found = [(i, measured.gate(other.id, g.id)) for i, g in enumerate(gates)]
        chosen = [(i, r.comparison) for i, r in found if r is not None and r.comparison is not None]
        if not chosen:
            continue
        series.append(Series(label=other.id, xs=tuple(float(i) for i, _ in chosen),
                             ys=tuple(c.delta for _, c in chosen), lows=tuple(c.ci_low for _, c in chosen),
                             highs=tuple(c.ci_high for _, c in chosen)))
    if not series:
        return None
    return PlotData(kind="quality", path="plots/quality-deltas.png",
                    alt="Quality delta against the reference with 95% intervals, per gate",
                    panels=(Panel(title="Delta vs the reference (95% paired-bootstrap CI)", xlabel="gate",
                                  ylabel="delta (metric units)", series=tuple(series), style="interval",
                                  xticks=tuple(g.label or g.id for g in gates)),))


def _plain(text: str) -> str:
    # matplotlib reads $...$ as mathtext: a label from a manifest must print literally.
    return text.replace("\\", "/").replace("$", r"\$")


def draw(plot: PlotData) -> bytes:
    """The plot as PNG bytes."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.2 * len(plot.panels), 3.4), dpi=90, layout="constrained")
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
                ax.errorbar(xs, s.ys, yerr=errors, fmt="o", capsize=3, label=_plain(s.label))
            else:
                ax.plot(s.xs, s.ys, marker="o", label=_plain(s.label))
        if panel.style == "interval":
            ax.axhline(0.0, color="grey", linewidth=0.8)
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
        ax.legend(fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
