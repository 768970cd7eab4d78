"""A compared acceptance row's interval over prompts (`hfrelease.speed.acceptance`).

Greedy repeats of a speculative point give identical counters: an interval over repeats is zero wide and
calls any difference better or worse. When both records keep their per-request counters (the batch-1
points' `*.requests.jsonl`), the interval of NEW - OLD resamples prompts instead: the same prompts drawn on
both sides when both measured one prompt set (a paired bootstrap), each side its own otherwise. Both
per-request files are checked first (`load_outcomes`): a missing or edited one is a `LedgerError` (exit 6),
never an interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.speed.acceptance import LENGTH, RATE, difference_interval
from hfrelease.speed.per_request import load_outcomes

ACCEPTANCE_METRICS = (RATE, LENGTH)


@dataclass(frozen=True, kw_only=True)
class PromptInterval:
    low: float
    high: float
    paired: bool
    n_old: int  # prompts
    n_new: int


def _summaries(root: Path, record: LedgerRecord) -> list[Any] | None:
    if load_outcomes(Ledger(root), record) is None:
        return None
    found = record.extra.get("requests")
    return list(found) if isinstance(found, list) and found else None


def over_prompts(metric: str, old: tuple[Path, LedgerRecord], new: tuple[Path, LedgerRecord]) -> PromptInterval | None:
    """The interval of NEW - OLD of an acceptance `metric` resampled over prompts, when both sides (ledger root,
    record) keep per-request counters; None otherwise."""
    if metric not in ACCEPTANCE_METRICS:
        return None
    a, b = _summaries(*old), _summaries(*new)
    if a is None or b is None:
        return None
    paired = old[1].task_hash == new[1].task_hash and len(a) == len(b)
    interval = difference_interval(a, b, metric, paired=paired)
    if interval is None:
        return None
    return PromptInterval(low=interval[0], high=interval[1], paired=paired, n_old=len(a), n_new=len(b))
