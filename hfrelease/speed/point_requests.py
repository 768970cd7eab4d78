"""A speed point's per-request pass (`hfrelease.speed.per_request`) joined to its record: which points have
one, the raw file and the record fields it adds, and the comparison of a speculative point's outputs with
no speculation's (`hfrelease.speed.acceptance.match_outputs`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from hfrelease.ledger.record import LedgerRecord, Metric
from hfrelease.ledger.store import Ledger
from hfrelease.speed import acceptance
from hfrelease.speed.per_request import PerRequest, load_outcomes, parse_jsonl
from hfrelease.speed.plan import NONE, PointJob, SpeedPlan, SpeedServerJob


def wants_requests(job: SpeedServerJob, point: PointJob) -> bool:
    """A workload's own batch-1 points have a per-request pass: every speculative one (its acceptance per
    prompt), and the no-speculation one at temperature 0 (the outputs the speculative ones must equal). A
    context sweep's points and higher concurrencies keep their pooled counters alone (the pass would cost a
    full extra run of each)."""
    if point.input_len or point.concurrency != 1:
        return False
    return job.speculative is not None or point.workload.temperature == 0


def requests_file(point: PointJob, data: bytes) -> tuple[str, bytes]:
    """The content-addressed name of a point's `*.requests.jsonl` (not *.json: the ledger reads those)."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    return f"speed-{point.workload.id}-{point.input_key[:12]}-{digest}.requests.jsonl", data


def requests_extra(per_request: PerRequest, name: str) -> dict[str, Any]:
    """The record fields of a per-request pass: the file, each request's summary, and the acceptance
    intervals resampled over prompts (speculative points only)."""
    summaries = per_request.summaries()
    found: dict[str, Any] = {"requests_raw": [name], "requests": summaries, "spec_depth": per_request.depth}
    bounds = acceptance.intervals(summaries)
    if bounds:
        found["acceptance_intervals"] = bounds
        found["acceptance_resamples"] = "prompts"
    return found


def baseline_record(
    plan: SpeedPlan, job: SpeedServerJob, point: PointJob, measured: Mapping[str, LedgerRecord]
) -> LedgerRecord | None:
    """No speculation's record of `point`'s workload on the same artifact at batch 1 (measured in this run
    or recorded), or None."""
    for other in plan.servers:
        if other.artifact.id != job.artifact.id or other.spec_id != NONE:
            continue
        for candidate in other.points:
            if candidate.workload.id == point.workload.id and candidate.concurrency == 1 and not candidate.input_len:
                return measured.get(candidate.input_key, candidate.recorded)
    return None


def with_output_match(
    record: LedgerRecord, files: list[tuple[str, bytes]], baseline: LedgerRecord | None, ledger: Ledger
) -> LedgerRecord:
    """`record` (a speculative batch-1 point at temperature 0) with the share of its prompts whose output
    tokens equal `baseline`'s (`identical_output_share`) and where each other one first differs. Only a
    baseline served by the same vLLM version counts ("the same server build"); without one nothing is added
    and a gate that needs the figure fails for want of it."""
    names = record.extra.get("requests_raw")
    if (
        record.status != "ok"
        or not names
        or baseline is None
        or baseline.status != "ok"
        or baseline.versions.get("vllm") != record.versions.get("vllm")
        or record.generation.get("temperature") != 0
    ):
        return record
    base = load_outcomes(ledger, baseline)
    if base is None:
        return record
    mine = parse_jsonl(dict(files)[str(names[0])])  # type: ignore[index]
    try:
        match = acceptance.match_outputs(mine, base)
    except ValueError:
        return record
    metrics = {**record.metrics, acceptance.IDENTICAL: Metric(value=round(match.share, 6))}
    extra = {**record.extra, "identical_outputs": match.as_extra(baseline.input_key)}
    return record.model_copy(update={"metrics": metrics, "extra": extra})
