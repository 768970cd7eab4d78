"""Which ledger records a card shows, and what follows from them: gate deltas, speedups, acceptance.

Numbers only, no formatting (that is `context.py`'s job). Selection rules, each chosen so a card never
mixes measurements of different weights or shows a stale number:

- An artifact's *current* weights are those of its newest record; records of other weights are ignored.
- Per (artifact, gate) the newest record counts, void or not: a failed re-measurement is not hidden
  behind an older success. A gate with `seeds`: the newest record of each seed, all of them required.
- Per (artifact, workload, speculative config, concurrency) the newest "ok" speed record counts.
- The best batch-1 config of a workload is the one a "speed-best" record chose (`hfrelease eval --speed`
  records it, see `hfrelease.speed.best_record`) when that record was derived from exactly the batch-1
  speed records shown; otherwise (older ledgers, points measured since) it is computed from them.
- That fastest config is a *clear* win (`BestVerdict`) only when its record says `clear` (computed alike:
  its repeats do not overlap the runner-up's) and it is slower than no other config at any other measured
  point of the workload: each concurrency, each input length of its context sweep. Otherwise every card
  says "not a clear win" and where it loses, from this one verdict.
- Verdicts and deltas are `hfrelease.verdicts.verdict.gate_verdict`'s (the paired bootstrap with the
  gate's own seed), so a card shows exactly the verdict and interval `hfrelease eval` and the release judged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from hfrelease.cards.errors import CardError, MissingMeasurementError
from hfrelease.cards.inputs import CardInputs, RecordEntry
from hfrelease.evaluation.plan import gate_artifacts
from hfrelease.ledger.record import Sample
from hfrelease.manifest import Gate, Manifest, Workload
from hfrelease.speed.noise import SessionNoise, host_noise
from hfrelease.verdicts.comparison import Comparison
from hfrelease.verdicts.seeds import gate_seeds
from hfrelease.verdicts.verdict import Verdict, gate_verdict, headline_value, seeded_value

NONE = "none"  # the speculative "config" of serving without speculation
# How a card labels speed an emulation kernel measured (`SpeedPoint.emulated`).
EMULATED = "emulated"
_POSITION = re.compile(r"^spec_acceptance_pos_(\d+)$")


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """One gate on one artifact: the recorded value and, against the reference, the paired delta."""

    artifact_id: str
    gate: Gate
    entry: RecordEntry
    value: float | None  # None when the record is void
    stderr: float | None
    comparison: Comparison | None = None
    reference: RecordEntry | None = None
    verdict: Verdict  # `hfrelease.verdicts.verdict.gate_verdict`'s
    reason: str
    # A gate with `seeds`: every seed's record (`entry` is the first seed's), the reference's likewise, and
    # `value` / `stderr` over the runs (`hfrelease.verdicts.seeds.seeded_value`); empty for one run.
    seed_entries: tuple[RecordEntry, ...] = ()
    seed_references: tuple[RecordEntry, ...] = ()

    @property
    def entries(self) -> tuple[RecordEntry, ...]:
        """The records the value comes from: one per seed."""
        return self.seed_entries or (self.entry,)

    @property
    def seeds(self) -> int:
        return len(self.entries)

    @property
    def records(self) -> tuple[RecordEntry, ...]:
        references = self.seed_references or ((self.reference,) if self.reference is not None else ())
        return (*self.entries, *references)


@dataclass(frozen=True, kw_only=True)
class SpeedPoint:
    """One speed record: a workload on an artifact under one speculative config at one concurrency."""

    artifact_id: str
    workload: Workload
    speculative: str
    concurrency: int
    entry: RecordEntry
    metrics: Mapping[str, float]
    baseline: SpeedPoint | None = None  # the same point served without speculation
    input_len: int | None = None  # a context sweep's point ("speed-sweep" record), at concurrency 1

    @property
    def throughput(self) -> float:
        return self.metrics["output_throughput"]

    @property
    def emulated(self) -> bool:
        """Served by an emulation kernel (the record's `hardware.emulated`, `hfrelease.serving.emulation`): the
        numbers are the scheme's, the speed is not, so no best config or choice is drawn from it."""
        return bool(self.entry.record.hardware.get("emulated"))

    @property
    def speedup(self) -> float | None:
        if self.baseline is None or self.baseline.throughput <= 0:
            return None
        return self.throughput / self.baseline.throughput

    @property
    def records(self) -> tuple[RecordEntry, ...]:
        return (self.entry,) if self.baseline is None else (self.entry, self.baseline.entry)

    def positions(self, prefix: str = "spec_acceptance_pos_") -> list[tuple[int, float]]:
        """Per-position acceptance (unconditional by default), in position order."""
        found = [(int(k[len(prefix):]), v) for k, v in self.metrics.items()
                 if k.startswith(prefix) and k[len(prefix):].isdigit()]
        return sorted(found)


@dataclass(frozen=True, kw_only=True)
class Loss:
    """A measured point of a workload where the fastest batch-1 config is slower than another config."""

    faster: str  # the config faster there
    mine: SpeedPoint  # the fastest batch-1 config's point there (its concurrency or input length says where)
    theirs: SpeedPoint


@dataclass(frozen=True, kw_only=True)
class BestVerdict:
    """The one verdict on the fastest batch-1 config of (artifact, workload) every card shows.

    `clear` holds when its repeats do not overlap the runner-up's (the speed-best record's `clear`, or the
    same rule computed here) and `losses` is empty: it is slower than no other config at any measured point
    of the workload (other concurrencies, the context sweep's lengths)."""

    point: SpeedPoint
    overlaps: str | None  # the runner-up whose repeats overlap its own, when they do
    losses: tuple[Loss, ...]
    # The recorded verdict's batch-1 reason other than overlap (`hfrelease.speed.verdict`): its lead over this
    # runner-up is within the host's session noise ("within"), or no session noise was measured ("unmeasured").
    session: tuple[Literal["within", "unmeasured"], str] | None = None

    @property
    def clear(self) -> bool:
        return self.overlaps is None and not self.losses and self.session is None


@dataclass(frozen=True, kw_only=True)
class FamilyMeasurements:
    """The records behind a family's cards, selected and compared once for all of its cards."""

    gates: Mapping[tuple[str, str], GateResult]
    speed: Mapping[tuple[str, str, str, int], SpeedPoint]
    sizes: Mapping[str, tuple[int, RecordEntry]] = field(default_factory=dict)  # weight bytes and their record
    # Context sweeps' points ("speed-sweep" records) per (artifact, workload, config, input length)
    sweep: Mapping[tuple[str, str, str, int], SpeedPoint] = field(default_factory=dict)
    # "speed-best" records per (artifact, workload), newest first: the best configs as `hfrelease eval` chose
    recorded_best: Mapping[tuple[str, str], tuple[RecordEntry, ...]] = field(default_factory=dict)
    # The session noise of the hosts the speed points ran on, from the ledger's A/A groups (README "How speed
    # verdicts decide"); None when none was measured: speed comparisons then fall back to the repeats' ranges.
    noise: SessionNoise | None = None

    def gate(self, artifact_id: str, gate_id: str) -> GateResult | None:
        return self.gates.get((artifact_id, gate_id))

    def points(self, *, artifact_id: str | None = None, workload_id: str | None = None,
               draft_id: str | None = None) -> list[SpeedPoint]:
        """Speed points matching the filters, in (artifact, workload, config, concurrency) order."""
        chosen = [p for p in self.speed.values()
                  if (artifact_id is None or p.artifact_id == artifact_id)
                  and (workload_id is None or p.workload.id == workload_id)
                  and (draft_id is None or p.entry.record.draft_artifact_id == draft_id)]
        return sorted(chosen, key=lambda p: (p.artifact_id, p.workload.id, p.speculative, p.concurrency))

    def best_batch1(self, artifact_id: str, workload_id: str) -> SpeedPoint | None:
        """The speculative config with the highest batch-1 throughput.

        The recorded choice when a speed-best record was derived from exactly these batch-1 points (its
        `derived_from` equals their input keys), so the card says what `hfrelease eval` decided (ties:
        the config the workload lists first). Otherwise computed here (ties: the first config by id). None
        for an artifact an emulation kernel served (`SpeedPoint.emulated`).
        """
        batch1 = [p for p in self.points(artifact_id=artifact_id, workload_id=workload_id)
                  if p.concurrency == 1 and not p.emulated]
        keys = sorted(p.entry.record.input_key for p in batch1)
        for entry in self.recorded_best.get((artifact_id, workload_id), ()):
            if entry.record.extra.get("derived_from") == keys:
                chosen = [p for p in batch1 if p.speculative == entry.record.extra.get("speculative")]
                if chosen:
                    return chosen[0]
        return max(batch1, key=lambda p: p.throughput, default=None)

    def best_verdict(self, artifact_id: str, workload_id: str) -> BestVerdict | None:
        """`best_batch1`'s point with whether it is a clear win and, when not, where it loses (`BestVerdict`)."""
        best = self.best_batch1(artifact_id, workload_id)
        if best is None:
            return None
        points = self.points(artifact_id=artifact_id, workload_id=workload_id)
        batch1 = [p for p in points if p.concurrency == 1 and p.speculative != best.speculative]
        runner_up = max(batch1, key=lambda p: p.throughput, default=None)
        overlaps = None
        session: tuple[Literal["within", "unmeasured"], str] | None = None
        recorded = [e for e in self.recorded_best.get((artifact_id, workload_id), ())
                    if e.record.extra.get("derived_from") == sorted(
                        p.entry.record.input_key for p in points if p.concurrency == 1)]
        named = recorded[0].record.extra.get("runner_up") if recorded else None
        other = named if isinstance(named, str) else runner_up.speculative if runner_up else "another config"
        why = recorded[0].record.extra.get("not_clear", False) if recorded else False
        if why is None or isinstance(why, str):
            # A record judged against session noise says why its batch-1 win is not clear (None: it is; its
            # losses at other points are found below).
            if isinstance(why, str) and why.startswith("session noise unmeasured"):
                session = ("unmeasured", other)
            elif isinstance(why, str) and why.startswith("within session noise"):
                session = ("within", other)
            elif isinstance(why, str):
                overlaps = other
        elif recorded and recorded[0].record.extra.get("clear") is False:
            overlaps = other
        elif not recorded and runner_up is not None and _overlap(best, runner_up):
            overlaps = runner_up.speculative
        losses: list[Loss] = []
        grouped: dict[str, list[SpeedPoint]] = {}
        for p in points:
            if p.concurrency != 1:
                grouped.setdefault(f"concurrency {p.concurrency}", []).append(p)
        for p in sorted(self.sweep.values(), key=lambda p: (p.input_len or 0, p.speculative)):
            if p.artifact_id == artifact_id and p.workload.id == workload_id:
                grouped.setdefault(f"input {p.input_len} tokens", []).append(p)
        for found in grouped.values():
            mine = next((p for p in found if p.speculative == best.speculative), None)
            faster = max((p for p in found if p is not mine), key=lambda p: p.throughput, default=None)
            if mine is not None and faster is not None and faster.throughput > mine.throughput:
                losses.append(Loss(faster=faster.speculative, mine=mine, theirs=faster))
        return BestVerdict(point=best, overlaps=overlaps, losses=tuple(losses), session=session)


def _overlap(a: SpeedPoint, b: SpeedPoint) -> bool:
    """Whether the two points' repeats overlap (`hfrelease.speed.verdict`'s rule for a clear win)."""
    def spread(p: SpeedPoint) -> tuple[float, float]:
        pair = p.entry.record.extra.get("spread")
        found = pair.get("output_throughput") if isinstance(pair, dict) else None
        values = [float(v) for v in found if isinstance(v, int | float)] if isinstance(found, list) else []
        if len(values) == 2:
            return values[0], values[1]
        return p.throughput, p.throughput

    sa, sb = spread(a), spread(b)
    return sa[0] <= sb[1] and sb[0] <= sa[1]


def measure_family(inputs: CardInputs) -> FamilyMeasurements:
    """Select records and compute deltas; a gate the manifest promises but the ledger lacks is an error."""
    manifest = inputs.manifest
    current = _current_hashes(inputs)
    usable = [e for e in inputs.records if current.get(e.record.artifact_id) == e.record.artifact_hash]
    gates = _gate_results(manifest, usable)
    speed = _speed_points(manifest, usable)
    sizes: dict[str, tuple[int, RecordEntry]] = {}
    for entry in usable:
        if entry.record.kind != "speed-best":  # cite a measurement, not the choice derived from them
            sizes[entry.record.artifact_id] = (sum(f.size for f in entry.record.artifact_files), entry)
    recorded_best: dict[tuple[str, str], list[RecordEntry]] = {}
    for entry in sorted(usable, key=lambda e: (when(e), e.name), reverse=True):
        if entry.record.kind == "speed-best" and entry.record.status == "ok":
            recorded_best.setdefault((entry.record.artifact_id, entry.record.subject_id), []).append(entry)
    sweep = _sweep_points(manifest, usable)
    noise = host_noise((e.record for e in inputs.records), (p.entry.record for p in [*speed.values(), *sweep.values()]))
    if inputs.changes is not None and inputs.changes.noise is not None and (
            noise is None or inputs.changes.noise.df > noise.df):
        # Rendered `--since` an earlier release: its ledger's unchanged points are A/A groups too (the comparison
        # pools both ledgers'), and one pair alone (df 1, t 12.7) leaves intervals that say nothing.
        noise = inputs.changes.noise
    return FamilyMeasurements(gates=gates, speed=speed, sizes=sizes, sweep=sweep,
                              recorded_best={k: tuple(v) for k, v in recorded_best.items()}, noise=noise)


def when(entry: RecordEntry) -> datetime:
    return datetime.fromisoformat(entry.record.started_at)


def _newest(entries: list[RecordEntry]) -> RecordEntry:
    return max(entries, key=lambda e: (when(e), e.name))


def _current_hashes(inputs: CardInputs) -> dict[str, str]:
    by_artifact: dict[str, list[RecordEntry]] = {}
    for entry in inputs.records:
        by_artifact.setdefault(entry.record.artifact_id, []).append(entry)
    return {aid: _newest(entries).record.artifact_hash for aid, entries in by_artifact.items()}


def _gate_results(manifest: Manifest, usable: list[RecordEntry]) -> dict[tuple[str, str], GateResult]:
    grouped: dict[tuple[str, str], list[RecordEntry]] = {}
    for entry in usable:
        if entry.record.kind == "gate":
            grouped.setdefault((entry.record.artifact_id, entry.record.subject_id), []).append(entry)
    reference = manifest.reference.id
    results: dict[tuple[str, str], GateResult] = {}
    missing: list[str] = []
    for gate in manifest.gate:
        refs = _runs(gate, grouped.get((reference, gate.id), []))
        for artifact_id in gate_artifacts(manifest, gate):
            runs = _runs(gate, grouped.get((artifact_id, gate.id), []))
            if not runs or None in runs:
                lacking = [str(s) for s, run in zip(gate_seeds(gate), runs, strict=True) if run is None] if runs else []
                missing.append(f"gate {gate.id!r} on artifact {artifact_id!r}: no ledger record"
                               + (f" of seed {', '.join(lacking)}" if lacking else ""))
                continue
            found = [r for r in runs if r is not None]
            ref_runs = [r for r in refs if r is not None] if refs and None not in refs else []
            results[(artifact_id, gate.id)] = _judge(gate, artifact_id, found, ref_runs, reference_id=reference)
    if missing:
        raise MissingMeasurementError(missing)
    return results


def _runs(gate: Gate, entries: list[RecordEntry]) -> list[RecordEntry | None]:
    """The newest record of each of the gate's runs: one, or one per seed of `seeds` (None for a seed not
    recorded); an empty list when nothing is."""
    if not entries:
        return []
    if gate.seeds is None:
        return [_newest(entries)]
    by_seed = {seed: [e for e in entries if e.record.seed == seed] for seed in gate.seeds}
    return [_newest(found) if found else None for found in by_seed.values()]


def _headline(gate: Gate, entries: list[RecordEntry]) -> tuple[float, float | None]:
    for entry in entries:
        if headline_value(gate, entry.record) is None:
            raise CardError(
                f"ledger record {entry.name} has no value for metric {gate.metric!r} of gate {gate.id!r}",
                hint="The gate's metric changed since it was measured: re-run `hfrelease eval`.",
            )
    value = seeded_value(gate, [e.record for e in entries], [_samples(e) for e in entries])
    assert value.value is not None
    return value.value, value.stderr


def _judge(gate: Gate, artifact_id: str, entries: list[RecordEntry], refs: list[RecordEntry], *,
           reference_id: str) -> GateResult:
    """The card's gate result: `gate_verdict`, the verdict eval and the release decision give, on these records
    (one per run: a gate with `seeds` has one per seed, on the artifact and on the reference)."""
    entry, ref = entries[0], (refs[0] if refs else None)
    if any(e.record.status == "void" for e in entries):
        value, stderr = None, None
    else:
        value, stderr = _headline(gate, entries)
    by_record = {id(e.record): e for e in (*entries, *refs)}
    judged = gate_verdict(gate, [e.record for e in entries], reference_id=reference_id,
                          reference=[r.record for r in refs] if refs else None,
                          samples=lambda record: _samples(by_record[id(record)]))
    # The reference records the numbers of this row were compared with (traced by the card's numbers).
    compared = (bool(refs) and artifact_id != reference_id
                and all(e.record.status == "ok" for e in (*entries, *refs)))
    seeded = ({"seed_entries": tuple(entries), "seed_references": tuple(refs) if compared else ()}
              if gate.seeds is not None else {})
    return GateResult(artifact_id=artifact_id, gate=gate, entry=entry, value=value, stderr=stderr,
                      comparison=judged.comparison, reference=ref if compared else None, verdict=judged.verdict,
                      reason=judged.reason, **seeded)


def _samples(entry: RecordEntry) -> tuple[Sample, ...]:
    # Entries built from scores alone (tests, older callers) judge as samples without truncation.
    if entry.samples:
        return entry.samples
    return tuple(Sample(doc_id=d, score=s, truncated=False, empty=False) for d, s in entry.scores.items())


def _speed_key(entry: RecordEntry) -> tuple[str, int]:
    extra = entry.record.extra
    spec, concurrency = extra.get("speculative"), extra.get("concurrency")
    if not isinstance(spec, str) or isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise CardError(
            f"speed record {entry.name} lacks extra.speculative (a config id) or extra.concurrency (an integer)",
            hint="Re-run the speed anchors with this hfrelease version, or remove the record from the ledger.",
        )
    return spec, concurrency


def _speed_points(manifest: Manifest, usable: list[RecordEntry]) -> dict[tuple[str, str, str, int], SpeedPoint]:
    workloads = {w.id: w for w in manifest.workload}
    grouped: dict[tuple[str, str, str, int], list[RecordEntry]] = {}
    for entry in usable:
        record = entry.record
        if record.kind != "speed" or record.status != "ok" or record.subject_id not in workloads:
            continue  # a workload no longer in the manifest is not shown
        if "output_throughput" not in record.metrics:
            raise CardError(f"speed record {entry.name} has no output_throughput metric",
                            hint="Re-run the speed anchors, or remove the record from the ledger.")
        spec, concurrency = _speed_key(entry)
        grouped.setdefault((record.artifact_id, record.subject_id, spec, concurrency), []).append(entry)
    points: dict[tuple[str, str, str, int], SpeedPoint] = {}
    for key, entries in sorted(grouped.items()):
        entry = _newest(entries)
        points[key] = SpeedPoint(artifact_id=key[0], workload=workloads[key[1]], speculative=key[2],
                                 concurrency=key[3], entry=entry,
                                 metrics={k: m.value for k, m in entry.record.metrics.items()})
    for key, point in list(points.items()):
        baseline = points.get((key[0], key[1], NONE, key[3]))
        if point.speculative != NONE and baseline is not None:
            points[key] = SpeedPoint(**{**point.__dict__, "baseline": baseline})
    return points


def _sweep_points(manifest: Manifest, usable: list[RecordEntry]) -> dict[tuple[str, str, str, int], SpeedPoint]:
    """The newest ok "speed-sweep" record per (artifact, workload, config, input length), each with the point
    of the same length served without speculation as its baseline."""
    workloads = {w.id: w for w in manifest.workload}
    grouped: dict[tuple[str, str, str, int], list[RecordEntry]] = {}
    for entry in usable:
        record = entry.record
        length = record.extra.get("input_len")
        if (record.kind != "speed-sweep" or record.status != "ok" or record.subject_id not in workloads
                or isinstance(length, bool) or not isinstance(length, int)
                or "output_throughput" not in record.metrics):
            continue
        spec, _ = _speed_key(entry)
        grouped.setdefault((record.artifact_id, record.subject_id, spec, length), []).append(entry)
    points: dict[tuple[str, str, str, int], SpeedPoint] = {}
    for key, entries in sorted(grouped.items()):
        entry = _newest(entries)
        points[key] = SpeedPoint(artifact_id=key[0], workload=workloads[key[1]], speculative=key[2], concurrency=1,
                                 entry=entry, metrics={k: m.value for k, m in entry.record.metrics.items()},
                                 input_len=key[3])
    for key, point in list(points.items()):
        baseline = points.get((key[0], key[1], NONE, key[3]))
        if point.speculative != NONE and baseline is not None:
            points[key] = SpeedPoint(**{**point.__dict__, "baseline": baseline})
    return points
