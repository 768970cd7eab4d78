"""One speed point as the report shows it, read back from its ledger record (measured now or recorded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hfrelease.ledger.record import LedgerRecord


@dataclass(frozen=True, kw_only=True)
class SpeedRow:
    """A workload on an artifact under one speculative config at one concurrency."""

    artifact_id: str
    workload_id: str
    speculative: str
    concurrency: int
    draft_id: str | None
    origin: Literal["measured", "recorded"]
    status: Literal["ok", "void"]
    metrics: dict[str, float]
    spread: dict[str, list[float]] = field(default_factory=dict)
    failed: int = 0
    repeats: int = 0
    reason: str | None = None
    speedup: float | None = None  # output tok/s over the same point without speculation
    input_len: int | None = None  # a context sweep's point (`Workload.input_lens`)
    greedy: bool = True  # measured at temperature 0 (where outputs with and without speculation must agree)
    # 95 % intervals of acceptance figures resampled over prompts (`hfrelease.speed.acceptance`); {} without
    # a per-request pass
    acceptance_intervals: dict[str, list[float]] = field(default_factory=dict)
    # Served by an emulation kernel (the record's `hardware.emulated`, `hfrelease.serving.emulation`): its
    # speed is not the scheme's, so no best config or advice is drawn from it.
    emulated: bool = False
    # Per request, its acceptance counters (the record's `extra["requests"]`, `per_request.RequestOutcome.summary`)
    # and the prompt file's sha256: what a verdict pairing two points over the same prompts resamples. Left out of
    # `as_dict` (the report's rows).
    requests: tuple[dict[str, Any], ...] = ()
    prompts_sha256: str | None = None

    @property
    def throughput(self) -> float:
        return self.metrics.get("output_throughput", 0.0)

    @property
    def acceptance(self) -> float | None:
        return self.metrics.get("spec_acceptance_rate")

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("requests", "prompts_sha256")}


def row_from_record(record: LedgerRecord, *, origin: Literal["measured", "recorded"]) -> SpeedRow:
    extra = record.extra
    spread = _pairs(extra.get("spread"))
    concurrency = extra.get("concurrency")
    failed = extra.get("failed")
    repeats = extra.get("repeats")
    input_len = extra.get("input_len")
    requests = extra.get("requests")
    return SpeedRow(
        artifact_id=record.artifact_id,
        workload_id=record.subject_id,
        speculative=str(extra.get("speculative", "none")),
        concurrency=concurrency if isinstance(concurrency, int) else 1,
        draft_id=record.draft_artifact_id,
        origin=origin,
        status=record.status,
        metrics={k: m.value for k, m in record.metrics.items()},
        spread=spread,
        failed=failed if isinstance(failed, int) else 0,
        repeats=repeats if isinstance(repeats, int) else 0,
        reason=record.void_reason,
        input_len=input_len if isinstance(input_len, int) and not isinstance(input_len, bool) else None,
        greedy=record.generation.get("temperature", 0) == 0,
        acceptance_intervals=_pairs(extra.get("acceptance_intervals")),
        emulated=bool(record.hardware.get("emulated")),
        requests=tuple(r for r in requests if isinstance(r, dict)) if isinstance(requests, list) else (),
        prompts_sha256=record.task_hash,
    )


def _pairs(value: object) -> dict[str, list[float]]:
    """The [low, high] pairs of a record's `extra` mapping; anything else left out."""
    found: dict[str, list[float]] = {}
    if isinstance(value, dict):
        for name, pair in value.items():
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int | float) for v in pair):
                found[name] = [float(v) for v in pair if isinstance(v, int | float)]
    return found
