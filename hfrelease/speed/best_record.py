"""The best speculative config of a workload, recorded in the ledger as a "speed-best" record.

`verdict.best_configs` chooses, per (artifact, workload), the config with the highest median batch-1
output tok/s. This module turns each choice into a ledger record, so the decision is kept (and merged,
and published) with the measurements it was made from:

- `subject_id` is the workload, `serve`, the draft and the task fields are the winning point's;
- `metrics` holds the winner's `output_throughput` and, when a point without speculation was measured,
  its `speedup`;
- `extra` holds the winner (`speculative`), whether it is a `clear` win, the `runner_up`, every
  `candidates`' numbers and `derived_from`: the sorted input keys of the candidate speed records; and what
  the verdict was judged on (`verdict.best_configs`): `not_clear` (why it is no clear win at batch 1, or
  null), `loses_at` (each other point of the workload -- concurrency, context length -- where another config
  is faster), `judged_over` (those points' input keys) and `session_noise` (the host's, or null: unmeasured).

Its input key is derived from the candidates' input keys, and when the verdict read more, the other points'
and the session noise: a warm re-run over the same records finds the existing record (`Ledger.latest`) and
writes nothing, while re-measuring any of them (or measuring the noise anew) gives a new key and a new record.
The record measures nothing itself (`duration_s = 0`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from hfrelease.ledger.provenance import now_utc_iso
from hfrelease.ledger.record import JsonDict, LedgerRecord, Metric, input_key
from hfrelease.ledger.store import Ledger
from hfrelease.speed.noise import SessionNoise
from hfrelease.speed.result import SpeedRow, row_from_record
from hfrelease.speed.verdict import BestConfig, with_speedups

KIND = "speed-best"


def candidates(best: BestConfig, records: Iterable[LedgerRecord]) -> list[LedgerRecord]:
    """The records `best` was chosen from: the ok batch-1 speed records of its artifact and workload."""
    found: dict[str, LedgerRecord] = {}
    for record in records:
        if (record.kind == "speed" and record.status == "ok" and record.artifact_id == best.artifact_id
                and record.subject_id == best.workload_id
                and row_from_record(record, origin="recorded").concurrency == 1):
            found.setdefault(record.input_key, record)
    return [found[key] for key in sorted(found)]


def other_points(best: BestConfig, records: Iterable[LedgerRecord]) -> list[LedgerRecord]:
    """The workload's other ok points on the artifact (other concurrencies, context-sweep lengths), which the
    verdict judged `best` on too."""
    found: dict[str, LedgerRecord] = {}
    for record in records:
        if (record.kind in ("speed", "speed-sweep") and record.status == "ok" and record.artifact_id == best.artifact_id
                and record.subject_id == best.workload_id):
            row = row_from_record(record, origin="recorded")
            if row.concurrency != 1 or row.input_len is not None:
                found.setdefault(record.input_key, record)
    return [found[key] for key in sorted(found)]


def best_key(candidate_records: Sequence[LedgerRecord], others: Sequence[LedgerRecord] = (),
             noise: SessionNoise | None = None) -> str:
    """The input key of the speed-best record derived from exactly these candidate records (and other points
    and session noise, when the verdict read them)."""
    judged: dict[str, object] = {}
    if others:
        judged["others"] = sorted({r.input_key for r in others})
    if noise is not None:
        judged["noise"] = [round(noise.sigma, 6), noise.df, list(noise.groups)]
    return input_key(kind=KIND, candidates=sorted({r.input_key for r in candidate_records}), **judged)


def best_record(best: BestConfig, candidate_records: Sequence[LedgerRecord], *,
                started_at: str | None = None, others: Sequence[LedgerRecord] = ()) -> LedgerRecord:
    """The speed-best record of `best`, chosen among `candidate_records` (see `candidates`)."""
    if not candidate_records:
        raise ValueError(f"no candidate records for the best config of {best.artifact_id}/{best.workload_id}")
    rows = with_speedups([row_from_record(r, origin="recorded") for r in candidate_records])
    pairs = list(zip(candidate_records, rows, strict=True))
    winners = [(r, row) for r, row in pairs if row.speculative == best.speculative]
    if not winners:
        raise ValueError(f"the best config {best.speculative!r} of {best.artifact_id}/{best.workload_id} "
                         "is not among the candidate records")
    winner, win_row = max(winners, key=lambda pair: (pair[1].throughput, pair[0].input_key))
    ranked = sorted(pairs, key=lambda pair: (-pair[1].throughput, pair[1].speculative, pair[0].input_key))
    metrics = {"output_throughput": Metric(value=win_row.throughput)}
    if win_row.speedup is not None:
        metrics["speedup"] = Metric(value=win_row.speedup)
    extra: JsonDict = {
        "speculative": best.speculative,
        "clear": best.clear,
        "runner_up": best.runner_up,
        "candidates": [_candidate(r, row) for r, row in ranked],
        "derived_from": [key for key in sorted({r.input_key for r in candidate_records})],
        "not_clear": best.not_clear,
        "loses_at": [*best.loses_at],
        "judged_over": [*sorted({r.input_key for r in others})],
        "session_noise": best.noise.as_dict() if best.noise else None,
    }
    return LedgerRecord(
        kind=KIND,
        family=winner.family,
        artifact_id=winner.artifact_id,
        artifact_hash=winner.artifact_hash,
        artifact_files=winner.artifact_files,
        draft_artifact_id=winner.draft_artifact_id,
        draft_hash=winner.draft_hash,
        subject_id=best.workload_id,
        harness="vllm-bench",
        task=winner.task,
        task_hash=winner.task_hash,
        mode=winner.mode,
        n=winner.n,
        seed=winner.seed,
        generation=winner.generation,
        metrics=metrics,
        truncated=0,
        empty=0,
        serve=winner.serve,
        # Where and with what the winning point was measured: this record derives, it measures nothing.
        versions=winner.versions,
        hardware=winner.hardware,
        started_at=started_at or now_utc_iso(),
        duration_s=0,
        input_key=best_key(candidate_records, others, best.noise),
        extra=extra,
    )


def _candidate(record: LedgerRecord, row: SpeedRow) -> JsonDict:
    spread = row.spread.get("output_throughput")
    return {"speculative": row.speculative, "input_key": record.input_key, "output_throughput": row.throughput,
            "spread": list(spread) if spread else None, "speedup": row.speedup}


def record_best_configs(ledger: Ledger, best: Iterable[BestConfig], records: Sequence[LedgerRecord], *,
                        started_at: str | None = None) -> list[Path]:
    """Write a speed-best record per config of `best` that the ledger lacks; return the paths written.

    `records` are the speed records the configs were chosen from (other artifacts' and workloads', and
    other concurrencies, are ignored). A config whose candidates already have a speed-best record (same
    input key) writes nothing.
    """
    written: list[Path] = []
    for config in best:
        found, others = candidates(config, records), other_points(config, records)
        if not found or ledger.latest(best_key(found, others, config.noise)) is not None:
            continue
        written.append(ledger.write(best_record(config, found, started_at=started_at, others=others)))
    return written
