"""What measuring one gate gives, whichever its harness (lm-eval, custom, fidelity): the value and the
per-sample outcomes behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class GateRun:
    """What one gate measured: its numbers plus the per-sample outcomes behind them."""

    value: float
    stderr: float | None
    metrics: dict[str, dict[str, float | None]]
    samples: list[dict[str, Any]]
    n: int
    truncated: int
    empty: int
    requests: int
    task_hash: str | None
    lm_eval: dict[str, Any] = field(default_factory=dict)  # lm-eval's results, configs, versions, n-samples
    resumed: int = 0  # answers taken from an interrupted run's request cache (not sent again)
    raw: bytes | None = None  # raw responses kept beside the record (a fidelity gate's, one JSON line a prompt)
    failed: int = 0  # samples whose request failed after every attempt (scored on FAILED_ANSWER, never right)
    failures: dict[str, int] = field(default_factory=dict)  # failed requests by kind ("HTTP 500 ...": 3)
