"""Match the measurements of two ledgers by what they measure and compare each pair, with its evidence.

A gate row is (gate, mode, artifact); a speed row is (workload, speculative config, concurrency, mode,
artifact), its draft named. Each side's newest "ok" record of a row is compared (void records measured
nothing). A gate run under several seeds is one measurement recorded as one record per seed
(`hfrelease.verdicts.seeds`): its row is the newest record of each seed, the seeds merged as the verdict
merges them (the value is the mean of the runs' values, each item's score its mean over the seeds, an item
and its seeds one resampling unit). Which seeds belong together: the manifest's `seeds` of the gate when a
manifest is given; without one, the seeds of the newest record's sampled siblings (records differing from
it in the seed alone, at a temperature above 0; greedy runs under several seeds repeat one measurement).
The difference is always NEW - OLD in the metric's own unit, and its 95 % interval comes from:

- **a paired bootstrap** (`hfrelease.verdicts.comparison.paired_comparison`) when both records hold
  per-sample scores of the same items: the same task hash and the same document ids. Pairing removes the
  items' own difficulty from the noise, as it does for a gate against its reference.
- **an unpaired bootstrap** otherwise: each side's per-sample scores (a gate whose items changed), or each
  side's repeats read from the raw `vllm bench serve` results a speed record keeps (the repeats are
  independent runs; the record's value is their median, so the median is what is resampled).
- nothing, when a side holds neither (a record whose raw files are gone) or a speed side has a single repeat
  (nothing to resample): the row says "no interval".

The verdict reads the interval in the metric's direction: better when it lies above zero (below, for a
lower-is-better metric), worse when on the other side, within noise when it straddles zero.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from hfrelease.compare.sides import LedgerSide
from hfrelease.ledger.record import LedgerRecord
from hfrelease.speed.noise import METRIC as SESSION_METRIC
from hfrelease.speed.noise import SessionNoise, hardware_of, ledger_noise, sessions

if TYPE_CHECKING:
    from hfrelease.manifest import Manifest

CONFIDENCE = 0.95
RESAMPLES = 10_000
# "within session noise": a speed row whose inputs did not change (any difference is the sessions'), or whose
# change stays inside the session-noise interval; "session noise unmeasured": a throughput row whose repeats
# differ but no A/A group measured what varies between sessions (`hfrelease.speed.noise`).
Verdict = Literal["better", "worse", "within noise", "no interval", "within session noise",
                  "session noise unmeasured"]
Method = Literal["paired-bootstrap", "unpaired-bootstrap", "session-noise", "none"]
# Speed metrics compared, with the key of the same figure in one `vllm bench serve` result and its scale
# (vLLM reports the acceptance rate in percent, the record as a fraction).
SPEED_METRICS: dict[str, tuple[str, float]] = {
    "output_throughput": ("output_throughput", 1.0),
    "spec_acceptance_rate": ("spec_decode_acceptance_rate", 0.01),
    "spec_mean_acceptance_length": ("spec_decode_acceptance_length", 1.0),
}
# Lower-is-better metrics a record can carry (fidelity gates); everything else reads higher is better.
_LOWER_IS_BETTER = ("kl", "flip")


@dataclass(frozen=True, kw_only=True)
class ChangedInput:
    """One input that differs between the two records of a row: why a number may have moved."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, kw_only=True)
class ComparedRow:
    """One measurement present on both sides, compared."""

    kind: Literal["gate", "speed"]
    subject: str  # gate id or workload id
    config: str  # the gate's mode, or a speed row's "<speculative> c<concurrency> <mode>"
    artifact: str
    draft: str | None
    metric: str
    higher_is_better: bool
    old: float
    new: float
    delta: float  # new - old, in the metric's unit
    ci_low: float | None
    ci_high: float | None
    method: Method
    n_old: int
    n_new: int
    verdict: Verdict
    changed: tuple[ChangedInput, ...]
    # A speed row: the server sessions each side's measurement holds (a key recorded twice is one measurement
    # of two sessions, its value the median of all their repeats).
    sessions_old: int = 1
    sessions_new: int = 1
    # The two records compared (a gate run under several seeds: its first seed's): a card registers each
    # number it prints with the record it comes from.
    old_record: LedgerRecord = field(repr=False, compare=False)
    new_record: LedgerRecord = field(repr=False, compare=False)
    # A gate run under several seeds: every seed's record of each side, in seed order (one run: the record).
    old_runs: tuple[LedgerRecord, ...] = field(default=(), repr=False, compare=False)
    new_runs: tuple[LedgerRecord, ...] = field(default=(), repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.kind, self.subject, self.config, self.artifact)


@dataclass(frozen=True, kw_only=True)
class OneSidedRow:
    """A measurement found on one side only (a new gate, a retired workload, an artifact added)."""

    side: Literal["old", "new"]
    kind: Literal["gate", "speed"]
    subject: str
    config: str
    artifact: str
    draft: str | None


@dataclass(frozen=True, kw_only=True)
class FamilyComparison:
    family: str
    old_label: str
    new_label: str
    rows: tuple[ComparedRow, ...]
    one_sided: tuple[OneSidedRow, ...]
    # What varies between server sessions on the host, measured from the A/A groups of both sides; None when
    # neither side holds one (`hfrelease.speed.noise`).
    noise: SessionNoise | None = None

    def for_artifact(self, artifact_id: str) -> FamilyComparison:
        """The rows of one artifact: its own measurements, and those served with it as the draft."""
        def mine(row: ComparedRow | OneSidedRow) -> bool:
            return artifact_id in (row.artifact, row.draft)

        return FamilyComparison(family=self.family, old_label=self.old_label, new_label=self.new_label,
                                rows=tuple(r for r in self.rows if mine(r)),
                                one_sided=tuple(r for r in self.one_sided if mine(r)), noise=self.noise)


@dataclass(frozen=True, kw_only=True)
class _Measured:
    record: LedgerRecord  # the row's newest record; a gate run under several seeds: its first seed's
    side: LedgerSide
    runs: tuple[LedgerRecord, ...] = ()  # a gate run under several seeds: each seed's record, in seed order
    # A speed row: every session of its measurement (its input key recorded on the same hardware), oldest first.
    sessions: tuple[LedgerRecord, ...] = ()

    @property
    def records(self) -> tuple[LedgerRecord, ...]:
        return self.runs or (self.record,)


def compare_ledgers(old: LedgerSide, new: LedgerSide, *, manifest: Manifest | None = None) -> FamilyComparison:
    """Every measurement of `old` and `new` matched and compared; raise UsageError for two families.

    `manifest`: the family's, when known; it says which seeds of a gate are one measurement."""
    from hfrelease.errors import UsageError

    if old.family != new.family:
        raise UsageError(f"{old.label} is a ledger of family {old.family!r} and {new.label} of {new.family!r}: "
                         "only two ledgers of one family compare",
                         hint="Compare two releases (or refs, or directories) of the same family.")
    seeds = _manifest_seeds(manifest)
    olds, news = _latest(old, seeds), _latest(new, seeds)
    noise = ledger_noise([*old.records, *new.records])
    rows: list[ComparedRow] = []
    for key in sorted(olds.keys() & news.keys()):
        rows.extend(_compare(olds[key], news[key], noise))
    one_sided = [_one_sided("old", olds[k].record) for k in sorted(olds.keys() - news.keys())]
    one_sided += [_one_sided("new", news[k].record) for k in sorted(news.keys() - olds.keys())]
    return FamilyComparison(family=old.family, old_label=old.label, new_label=new.label,
                            rows=tuple(rows), one_sided=tuple(one_sided), noise=noise)


def row_key(record: LedgerRecord) -> tuple[str, str, str, str]:
    """What a record measures: (kind, gate or workload, mode or speed config, artifact)."""
    if record.kind == "gate":
        return ("gate", record.subject_id, record.mode, record.artifact_id)
    speculative = record.extra.get("speculative", "none")
    concurrency = record.extra.get("concurrency", 1)
    return ("speed", record.subject_id, f"{speculative} c{concurrency} {record.mode}", record.artifact_id)


# Per gate id of the manifest, the seeds of one measurement: its `seeds`, or None for a gate run once.
_Seeds = Mapping[str, tuple[int, ...] | None]


def _manifest_seeds(manifest: Manifest | None) -> _Seeds | None:
    if manifest is None:
        return None
    return {gate.id: tuple(gate.seeds) if gate.seeds is not None else None for gate in manifest.gate}


def _latest(side: LedgerSide, seeds: _Seeds | None) -> dict[tuple[str, str, str, str], _Measured]:
    newest: dict[tuple[str, str, str, str], LedgerRecord] = {}
    by_seed: dict[tuple[str, str, str, str], dict[int | None, LedgerRecord]] = {}
    # `records` are oldest first, so the newest ok record of a row (and of each seed) wins; speed-best records
    # are derived from the speed points, which are compared themselves.
    for record in side.records:
        if record.status == "ok" and record.kind in ("gate", "speed"):
            newest[row_key(record)] = record
            by_seed.setdefault(row_key(record), {})[record.seed] = record
    found: dict[tuple[str, str, str, str], _Measured] = {}
    measured = sessions(side.records)
    for key, record in newest.items():
        runs = _seed_runs(record, by_seed[key], seeds) if record.kind == "gate" else ()
        same = tuple(measured.get((record.input_key, hardware_of(record)), ())) if record.kind == "speed" else ()
        found[key] = _Measured(record=runs[0] if runs else record, side=side, runs=runs, sessions=same)
    return found


def _seed_runs(
    newest: LedgerRecord, by_seed: Mapping[int | None, LedgerRecord], seeds: _Seeds | None
) -> tuple[LedgerRecord, ...]:
    """The records of one gate measurement run under several seeds, in seed order; () for a gate run once.

    Only records measuring what the row's newest record measures, but for the seed (same weights, task,
    generation settings, harness, n), are seeds of it: a seed recorded for older weights is not this
    measurement's. With the manifest's seeds of the gate, exactly those seeds are looked for."""
    def sibling(record: LedgerRecord) -> bool:
        return _measures(record) == _measures(newest)

    if seeds is not None and newest.subject_id in seeds:
        wanted = seeds[newest.subject_id]
        if wanted is None:
            return ()
        runs = tuple(by_seed[s] for s in wanted if s in by_seed and sibling(by_seed[s]))
    else:
        temperature = newest.generation.get("temperature")
        if not isinstance(temperature, int | float) or temperature <= 0:
            return ()
        runs = tuple(r for _, r in sorted((s, r) for s, r in by_seed.items() if s is not None and sibling(r)))
    return runs if len(runs) > 1 else ()


def _measures(record: LedgerRecord) -> str:
    """What a gate record measures, but for its seed (and when or with which versions it ran)."""
    return json.dumps([record.artifact_hash, record.harness, record.task, record.task_hash, record.n,
                       record.generation, record.draft_hash], sort_keys=True)


def _one_sided(side: Literal["old", "new"], record: LedgerRecord) -> OneSidedRow:
    kind, subject, config, artifact = row_key(record)
    return OneSidedRow(side=side, kind="gate" if kind == "gate" else "speed", subject=subject, config=config,
                       artifact=artifact, draft=record.draft_artifact_id)


def gate_metric(record: LedgerRecord) -> str:
    """The metric a gate record is judged on: the one it names (`extra.metric`), else its only or first one."""
    named = record.extra.get("metric")
    if isinstance(named, str) and named in record.metrics:
        return named
    return sorted(record.metrics)[0]


def higher_is_better(record: LedgerRecord, metric: str) -> bool:
    """lm-eval's own direction for the metric when the record carries it; fidelity figures are lower-better."""
    lm_eval = record.extra.get("lm_eval")
    if isinstance(lm_eval, dict):
        directions = lm_eval.get("higher_is_better")
        if isinstance(directions, dict):
            for task in directions.values():
                name = metric.split(",", maxsplit=1)[0]
                if isinstance(task, dict) and isinstance(task.get(name), bool):
                    return bool(task[name])
    return not any(word in metric for word in _LOWER_IS_BETTER)


def _compare(old: _Measured, new: _Measured, noise: SessionNoise | None) -> list[ComparedRow]:
    changed = tuple(_changed(old, new))
    if new.record.kind == "gate":
        metric = gate_metric(new.record)
        if any(metric not in r.metrics for r in (*old.records, *new.records)):
            return []
        return [_gate_row(old, new, metric, changed)]
    rows = []
    for metric in SPEED_METRICS:
        if metric in old.record.metrics and metric in new.record.metrics:
            rows.append(_over_prompts(_speed_row(old, new, metric, changed, noise), old, new))
    return rows


def _over_prompts(row: ComparedRow, old: _Measured, new: _Measured) -> ComparedRow:
    """An acceptance row with its interval resampled over prompts (`hfrelease.compare.acceptance_rows`) when both
    sides keep per-request counters: greedy repeats alone give identical counters, a zero-wide interval."""
    from hfrelease.compare.acceptance_rows import over_prompts

    found = over_prompts(row.metric, (old.side.root, old.record), (new.side.root, new.record))
    if found is None:
        return row
    return replace(row, ci_low=found.low, ci_high=found.high, n_old=found.n_old, n_new=found.n_new,
                   method="paired-bootstrap" if found.paired else "unpaired-bootstrap",
                   # Unchanged inputs keep the row's own verdict (what differs then is the session, not the draft).
                   verdict=verdict(found.low, found.high, higher_is_better=True) if row.changed else row.verdict)

def sample_scores(measured: _Measured) -> dict[str, float]:
    """Per item, its score; for a gate run under several seeds, its mean over the seeds that all scored it."""
    from hfrelease.ledger.store import Ledger
    from hfrelease.verdicts.seeds import item_means

    ledger = Ledger(measured.side.root)
    if not measured.runs:
        return {s.doc_id: s.score for s in ledger.load_samples(measured.record)}
    runs = {i: ledger.load_samples(r) for i, r in enumerate(measured.runs)}
    if not all(runs.values()):
        return {}  # a seed without its samples: no interval rather than one from part of the runs
    return item_means(runs, lambda s: s.score)[0]


def _run_mean(measured: _Measured, metric: str) -> float:
    """The value of a measurement: its record's, or for a gate run under several seeds the runs' mean."""
    return math.fsum(r.metrics[metric].value for r in measured.records) / len(measured.records)


def _gate_row(old: _Measured, new: _Measured, metric: str, changed: tuple[ChangedInput, ...]) -> ComparedRow:
    from hfrelease.verdicts.comparison import paired_comparison

    o, n = old.record, new.record
    hib = higher_is_better(n, metric)
    old_scores, new_scores = sample_scores(old), sample_scores(new)
    low = high = None
    method: Literal["paired-bootstrap", "unpaired-bootstrap", "none"] = "none"
    if old_scores and new_scores and o.task_hash == n.task_hash and old_scores.keys() == new_scores.keys():
        # higher_is_better=True: the interval of NEW - OLD as measured; the direction is read below.
        paired = paired_comparison(new_scores, old_scores, margin=0.0, higher_is_better=True,
                                   confidence=CONFIDENCE, resamples=RESAMPLES)
        low, high, method = paired.ci_low, paired.ci_high, "paired-bootstrap"
    elif old_scores and new_scores:
        low, high = unpaired_interval(list(old_scores.values()), list(new_scores.values()), _mean)
        method = "unpaired-bootstrap"
    old_value, new_value = _run_mean(old, metric), _run_mean(new, metric)
    return ComparedRow(kind="gate", subject=n.subject_id, config=n.mode, artifact=n.artifact_id,
                       draft=n.draft_artifact_id, metric=metric, higher_is_better=hib, old=old_value,
                       new=new_value, delta=new_value - old_value, ci_low=low, ci_high=high, method=method,
                       n_old=o.n, n_new=n.n, verdict=verdict(low, high, higher_is_better=hib), changed=changed,
                       old_record=o, new_record=n, old_runs=old.records, new_runs=new.records)


def repeats(measured: _Measured, metric: str) -> list[float]:
    """The per-repeat values of a speed metric, from the raw `vllm bench serve` results the records keep: every
    session's of the measurement. A side whose raw files are missing or edited was refused when read
    (`hfrelease.compare.sides`); `Ledger.raw_bytes` checks each file again."""
    from hfrelease.ledger.store import Ledger

    key, scale = SPEED_METRICS[metric]
    ledger = Ledger(measured.side.root)
    values: list[float] = []
    for record in measured.sessions or (measured.record,):
        raw = record.extra.get("raw")
        for name in raw if isinstance(raw, list) else []:
            for line in ledger.raw_bytes(record, str(name)).decode().splitlines():
                if line.strip():
                    value = json.loads(line).get(key)
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        values.append(float(value) * scale)
    return values


def _speed_row(old: _Measured, new: _Measured, metric: str, changed: tuple[ChangedInput, ...],
               noise: SessionNoise | None) -> ComparedRow:
    o, n = old.record, new.record
    old_runs, new_runs = repeats(old, metric), repeats(new, metric)
    sessions_old, sessions_new = len(old.sessions) or 1, len(new.sessions) or 1
    old_value, new_value = _value(old, old_runs, metric), _value(new, new_runs, metric)
    low = high = None
    method: Method = "none"
    # One repeat has no spread to resample: its "interval" would be the point difference, zero wide, and call
    # a single run's noise better or worse (the demo's context workload runs once per point).
    if len(old_runs) > 1 and len(new_runs) > 1:
        low, high = unpaired_interval(old_runs, new_runs, statistics.median)
        method = "unpaired-bootstrap"
    timed = metric == SESSION_METRIC
    if timed and noise is not None and old_value > 0 and new_value > 0:
        # The session-noise interval of NEW / OLD, in tok/s; the repeats' own interval is kept inside it (the
        # hull of both), so a session pair that happened to agree never narrows what the repeats show.
        log_low, log_high = noise.log_interval(old_value, new_value, sessions_old=sessions_old,
                                               sessions_new=sessions_new)
        session_low, session_high = old_value * math.expm1(log_low), old_value * math.expm1(log_high)
        low = session_low if low is None else min(low, session_low)
        high = session_high if high is None else max(high, session_high)
        method = "session-noise"
    found = verdict(low, high, higher_is_better=True)
    if not changed and low is not None:
        found = "within session noise"  # the same inputs on the same host: any difference is the sessions'
    elif timed and found in ("better", "worse") and method != "session-noise":
        found = "session noise unmeasured"  # repeats of one session each: what varies between sessions unknown
    elif method == "session-noise" and found == "within noise":
        found = "within session noise"
    return ComparedRow(kind="speed", subject=n.subject_id, config=row_key(n)[2], artifact=n.artifact_id,
                       draft=n.draft_artifact_id, metric=metric, higher_is_better=True, old=old_value,
                       new=new_value, delta=new_value - old_value, ci_low=low, ci_high=high, method=method,
                       n_old=len(old_runs), n_new=len(new_runs), verdict=found, changed=changed,
                       sessions_old=sessions_old, sessions_new=sessions_new, old_record=o, new_record=n)


def _value(measured: _Measured, runs: Sequence[float], metric: str) -> float:
    """A speed measurement's value: its record's (the median of its repeats); a measurement of several sessions,
    the median of all their repeats."""
    if len(measured.sessions) > 1 and runs:
        return float(statistics.median(runs))
    return measured.record.metrics[metric].value


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def unpaired_interval(
    old: Sequence[float], new: Sequence[float], statistic: Callable[[Sequence[float]], float], *, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of statistic(NEW) - statistic(OLD), each side resampled on its own."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = np.asarray(old, dtype=np.float64), np.asarray(new, dtype=np.float64)
    old_index = rng.integers(0, len(a), size=(RESAMPLES, len(a)))
    new_index = rng.integers(0, len(b), size=(RESAMPLES, len(b)))
    if statistic is statistics.median:
        diffs = np.median(b[new_index], axis=1) - np.median(a[old_index], axis=1)
    else:
        diffs = b[new_index].mean(axis=1) - a[old_index].mean(axis=1)
    alpha = 1.0 - CONFIDENCE
    low, high = (float(x) for x in np.quantile(diffs, [alpha / 2, 1 - alpha / 2]))
    return low, high


def verdict(low: float | None, high: float | None, *, higher_is_better: bool) -> Verdict:
    if low is None or high is None:
        return "no interval"
    if low > 0:
        return "better" if higher_is_better else "worse"
    if high < 0:
        return "worse" if higher_is_better else "better"
    return "within noise"


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def changed_inputs(old: LedgerRecord, new: LedgerRecord) -> list[ChangedInput]:
    """The inputs that differ between two records of one row, in the words a reader knows."""
    found: list[ChangedInput] = []

    def add(name: str, a: object, b: object, *, digest: bool = False) -> None:
        if a != b:
            show: Callable[[object], str] = (lambda v: "none" if v is None else str(v)[:12]) if digest else _short
            found.append(ChangedInput(name=name, old=show(a), new=show(b)))

    add("weights", old.artifact_hash, new.artifact_hash, digest=True)
    if new.kind != "gate" and old.hardware != new.hardware:  # another host is another measurement of speed
        keys = sorted(k for k in old.hardware.keys() | new.hardware.keys()
                      if old.hardware.get(k) != new.hardware.get(k))
        add("hardware", {k: old.hardware.get(k) for k in keys}, {k: new.hardware.get(k) for k in keys})
    add("draft weights", old.draft_hash, new.draft_hash, digest=True)
    for library in ("vllm", "lm_eval", "transformers", "torch"):
        add(library.replace("_", "-") + " version", old.versions.get(library), new.versions.get(library))
    add("serve command", old.serve.display, new.serve.display)
    add("prompts" if new.kind != "gate" else "task", old.task_hash, new.task_hash, digest=True)
    for key in sorted(old.generation.keys() | new.generation.keys()):
        add(f"generation.{key}", old.generation.get(key), new.generation.get(key))
    add("n", old.n, new.n)
    add("seed", old.seed, new.seed)
    if not found and old.input_key != new.input_key:
        add("other inputs (input key)", old.input_key, new.input_key, digest=True)
    return found


def _changed(old: _Measured, new: _Measured) -> list[ChangedInput]:
    """`changed_inputs` of the two measurements; for a gate run under several seeds, its seeds compared as a set."""
    found = changed_inputs(old.record, new.record)
    if not old.runs and not new.runs:
        return found
    found = [c for c in found if c.name != "seed"]
    old_seeds, new_seeds = ([r.seed for r in m.records] for m in (old, new))
    if old_seeds != new_seeds:
        found.append(ChangedInput(name="seeds", old=_short(", ".join(map(str, old_seeds))),
                                  new=_short(", ".join(map(str, new_seeds)))))
    return found


def by_key(rows: Sequence[ComparedRow]) -> Mapping[tuple[str, str, str, str], list[ComparedRow]]:
    grouped: dict[tuple[str, str, str, str], list[ComparedRow]] = {}
    for row in rows:
        grouped.setdefault(row.key, []).append(row)
    return grouped
