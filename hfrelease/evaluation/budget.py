"""How many requests an artifact's gates keep in flight together: the knee of its measured concurrency sweep.

A server's throughput grows with the number of requests it batches, up to a point past which more requests
only queue: the knee. An artifact whose speed anchors swept concurrency (a workload with several
`concurrency` levels, served without speculation) has that curve in its ledger; its gates then share one
budget of requests in flight equal to the knee, so the server runs where it generates most per second.
Without a sweep the budget is the manifest's `[eval] in_flight`, else the largest `num_concurrent` of the
artifact's gates (what one gate alone sends). The sweep counts only when it measured the artifact's
current weights served with the gate server's own command. When `hfrelease eval --speed` measures the
artifact's sweep in the same run, it measures it on the gate server before the gates and takes the budget
from it (`planned_sweep`, `sweep_first`, `measured_first`); the dry run says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Gate, Manifest

# The knee: the smallest concurrency whose throughput reaches this share of the sweep's peak. Past it, doubling
# the requests in flight buys at most the remaining tenth, and costs latency and KV cache for the tail.
KNEE_SHARE = 0.9


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    concurrency: int
    throughput: float  # output tokens per second, the median of its repeats
    record: str  # the speed record's input key


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """Throughput against concurrency of one workload on one artifact (no speculation), lowest first."""

    workload_id: str
    points: tuple[SweepPoint, ...]

    @property
    def peak(self) -> SweepPoint:
        return max(self.points, key=lambda p: p.throughput)

    def knee(self, share: float = KNEE_SHARE) -> SweepPoint:
        """The smallest concurrency whose throughput is at least `share` of the peak."""
        bar = share * self.peak.throughput
        return next(p for p in self.points if p.throughput >= bar)

    def throughput_at(self, concurrency: int) -> float:
        """The server's throughput at `concurrency`: measured, or interpolated linearly between the measured
        levels around it; below the lowest level, scaled down in proportion; above the highest, the highest's
        (never extrapolated upwards: a server past its last measured level is assumed no faster)."""
        points = self.points
        if concurrency <= points[0].concurrency:
            return points[0].throughput * concurrency / points[0].concurrency
        for low, high in itertools.pairwise(points):
            if concurrency <= high.concurrency:
                t = (concurrency - low.concurrency) / (high.concurrency - low.concurrency)
                return low.throughput + t * (high.throughput - low.throughput)
        return points[-1].throughput

    def describe(self) -> str:
        return ", ".join(f"c{p.concurrency} {p.throughput:.0f}" for p in self.points) + " tok/s"


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """The requests an artifact's gates keep in flight together, and where the figure comes from."""

    value: int
    # "sweep", "manifest" or "gates"; "sweep-first": the knee of a sweep this run measures before the gates,
    # `value` being the fallback used if that sweep is not recorded (a dry run's plan)
    source: str
    reason: str  # the figure's origin in words (shown by --dry-run and kept in each gate record)
    sweep: Sweep | None = None

    def as_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"in_flight": self.value, "source": self.source, "reason": self.reason}
        if self.sweep is not None:
            data["sweep"] = {"workload": self.sweep.workload_id,
                             "points": {str(p.concurrency): round(p.throughput, 3) for p in self.sweep.points}}
        return data


def find_sweep(ledger: Ledger, *, artifact_id: str, content_sha256: str, serve_display: str) -> Sweep | None:
    """The artifact's concurrency sweep in `ledger`: the workload measured at the most concurrency levels
    (without speculation, on these weights, served with this command); the newest record of each level."""
    latest: dict[str, dict[int, LedgerRecord]] = {}
    for record in ledger.records(artifact_id=artifact_id, kind="speed"):
        extra = record.extra
        concurrency = extra.get("concurrency")
        if (record.status != "ok" or record.artifact_hash != content_sha256 or extra.get("speculative") != "none"
                or record.serve.display != serve_display or not isinstance(concurrency, int)
                or "output_throughput" not in record.metrics):
            continue
        latest.setdefault(record.subject_id, {})[concurrency] = record  # records() is oldest first
    sweeps = [
        Sweep(workload_id=workload, points=tuple(
            SweepPoint(concurrency=c, throughput=levels[c].metrics["output_throughput"].value,
                       record=levels[c].input_key)
            for c in sorted(levels)))
        for workload, levels in latest.items() if len(levels) > 1
    ]
    if not sweeps:
        return None
    return max(sweeps, key=lambda s: (len(s.points), s.peak.throughput))


def choose_in_flight(manifest: Manifest, gates: Sequence[Gate], sweep: Sweep | None) -> InFlight:
    """The budget of requests in flight for an artifact's `gates`: the sweep's knee, else the manifest's
    `[eval] in_flight`, else the largest `num_concurrent` of the gates."""
    if sweep is not None:
        knee, peak = sweep.knee(), sweep.peak
        return InFlight(value=knee.concurrency, source="sweep", sweep=sweep, reason=(
            f"the knee of the measured sweep of workload {sweep.workload_id!r} ({sweep.describe()}): the lowest "
            f"concurrency reaching {KNEE_SHARE:.0%} of its peak {peak.throughput:.0f} tok/s"))
    if manifest.eval.in_flight is not None:
        return InFlight(value=manifest.eval.in_flight, source="manifest",
                        reason="[eval] in_flight of the manifest (no concurrency sweep recorded for this artifact)")
    value = max((g.num_concurrent for g in gates), default=1)
    return InFlight(value=value, source="gates", reason=(
        "the largest num_concurrent of its gates (no concurrency sweep recorded, no [eval] in_flight)"))


@dataclass(frozen=True, kw_only=True)
class PlannedSweep:
    """A concurrency sweep a run's speed plan measures: a workload's levels (no speculation), some pending."""

    workload_id: str
    levels: tuple[int, ...]

    def describe(self) -> str:
        return f"workload {self.workload_id!r} at concurrency {', '.join(map(str, self.levels))}"


def planned_sweep(points: Iterable[tuple[str, int, bool]]) -> PlannedSweep | None:
    """The sweep among a no-speculation speed job's `points` ((workload, concurrency, pending) each; context
    sweeps left out) that measuring them would record: the workload with the most concurrency levels, at least
    two, one of them pending (all recorded, the plan already found the sweep in the ledger)."""
    levels: dict[str, set[int]] = {}
    pending: set[str] = set()
    for workload, concurrency, is_pending in points:
        levels.setdefault(workload, set()).add(concurrency)
        if is_pending:
            pending.add(workload)
    candidates = [(len(found), workload) for workload, found in levels.items() if len(found) > 1]
    if not candidates:
        return None
    _, workload = max(candidates)
    if workload not in pending:
        return None
    return PlannedSweep(workload_id=workload, levels=tuple(sorted(levels[workload])))


def sweep_first(fallback: InFlight, planned: PlannedSweep) -> InFlight:
    """What a dry run shows for gates whose budget will come from a sweep measured just before them."""
    return InFlight(value=fallback.value, source="sweep-first", sweep=fallback.sweep, reason=(
        f"the knee of the concurrency sweep of {planned.describe()}, measured on this server first, before the "
        f"gates, in this run (the figure is known once it is measured); if it is not recorded, "
        f"{fallback.value}: {fallback.reason}"))


def measured_first(manifest: Manifest, gates: Sequence[Gate], sweep: Sweep | None, fallback: InFlight) -> InFlight:
    """The budget once the run has measured the artifact's sweep on its gate server: the knee of the sweep now
    in the ledger (`sweep`, from `find_sweep`), else `fallback` (the sweep failed), saying so."""
    if sweep is None:
        return replace(fallback, reason=f"{fallback.reason}; the concurrency sweep measured first in this run "
                                        "was not recorded")
    chosen = choose_in_flight(manifest, gates, sweep)
    return replace(chosen, reason=f"{chosen.reason}, measured on this server just before the gates")
