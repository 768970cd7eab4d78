"""A speed point's ledger record and its raw files: each repeat's benchmark JSON and /metrics snapshots,
content-addressed and written before the record that names them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hfrelease import __version__
from hfrelease.files.atomic import write_atomic
from hfrelease.ledger.provenance import hardware, versions
from hfrelease.ledger.record import LedgerRecord, Metric, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.redact import redact_env
from hfrelease.serving.command import ServeCommand
from hfrelease.speed.plan import PointJob, SpeedPlan, SpeedServerJob
from hfrelease.speed.summary import PointSummary


def raw_files(point: PointJob, raw: Sequence[tuple[str, bytes, bytes]]) -> list[tuple[str, bytes]]:
    """Content-addressed names for each repeat's benchmark JSON and /metrics snapshots.

    Not *.json: the ledger reads every *.json in an artifact's directory as a record.
    """
    import hashlib

    stem = f"speed-{point.workload.id}-{point.input_key[:12]}"
    files: list[tuple[str, bytes]] = []
    for _, content, snapshots in raw:
        files.append((f"{stem}-{hashlib.sha256(content).hexdigest()[:12]}.bench.jsonl", content))
        if snapshots:  # a server that does not speculate has no counters to keep
            files.append((f"{stem}-{hashlib.sha256(snapshots).hexdigest()[:12]}.metrics.txt", snapshots))
    return files


def point_record(
    plan: SpeedPlan, job: SpeedServerJob, point: PointJob, summary: PointSummary | None,
    raw: Sequence[tuple[str, bytes, bytes]], files: Sequence[tuple[str, bytes]], *, command: ServeCommand,
    started_at: str, duration: float,
    failure: str | None, memory: Mapping[str, Any] | None = None, served: Mapping[str, Any] | None = None,
) -> LedgerRecord:
    workload = point.workload
    assert job.content is not None
    void_reason = None
    if failure is not None:
        void_reason = f"the benchmark failed: {failure}"
    elif summary is None or summary.completed == 0:
        void_reason = "no request completed"
    elif summary.failed:
        total = summary.failed + summary.completed
        void_reason = f"{summary.failed} of {total} requests failed over {workload.repeats} repeats"
    metrics = summary.metrics if summary else {}
    extra: dict[str, Any] = {
        "speculative": job.spec_id,
        "concurrency": point.concurrency,
        "repeats": len(raw),
        "spread": summary.spread if summary else {},
        "failed": summary.failed if summary else 0,
        "completed": summary.completed if summary else 0,
        # Tokens a completed request generated, on average: far below output_len, tok/s is mostly TTFT.
        **({"mean_output_tokens": round(summary.output_tokens / summary.completed, 1)}
           if summary and summary.completed and summary.output_tokens else {}),
        "raw": [name for name, _ in files if name.endswith(".bench.jsonl")],
        "metrics_raw": [name for name, _ in files if name.endswith(".metrics.txt")],
        "bench_command": raw[0][0] if raw else None,
        **({"input_len": point.input_len} if point.input_len else {}),
    }
    if memory:
        extra["memory"] = dict(memory)  # the server's start-up figures and peak PSS up to this point
    return LedgerRecord(
        # A context sweep's point is a record of its own kind: what reads the workload's own points (best
        # configs, draft gates, load tables, compare) never mistakes it for one.
        kind="speed-sweep" if point.input_len else "speed",
        family=plan.manifest.family.name,
        artifact_id=job.artifact.id,
        artifact_hash=job.content.sha256,
        artifact_files=job.content.files,
        draft_artifact_id=job.draft.id if job.draft else None,
        draft_hash=job.draft_content.sha256 if job.draft_content else None,
        subject_id=workload.id,
        harness="vllm-bench",
        task=workload.prompts,
        task_hash=point.prompts_sha256,
        mode="thinking" if workload.thinking else "non-thinking",
        n=point.num_prompts,
        seed=0,
        generation={"output_len": workload.output_len, "temperature": workload.temperature,
                    **({"top_p": workload.top_p} if workload.top_p is not None else {}), "thinking": workload.thinking,
                    **({"ignore_eos": True} if workload.ignore_eos else {}),
                    "num_prompts": point.num_prompts, "warmups": workload.warmups,
                    "max_concurrency": point.concurrency, "backend": "openai-chat", "dataset": "custom"},
        metrics={name: Metric(value=value) for name, value in metrics.items()},
        truncated=0,
        empty=0,
        serve=ServeRecord(argv=tuple(command.argv), env=redact_env(dict(command.env)), display=job.public.display()),
        versions={**versions(), "hfrelease": __version__},
        hardware=hardware(served=served),
        started_at=started_at,
        duration_s=round(duration, 3),
        input_key=point.input_key,
        extra=extra,
        status="void" if void_reason else "ok",
        void_reason=void_reason,
    )


SHORT_OUTPUT_FRACTION = 0.25  # outputs that end before a quarter of the budget "end far before output_len"


def short_outputs(record: LedgerRecord) -> str | None:
    """What to say of a speed record whose requests stopped far before `output_len` (EOS, not the budget): its
    tok/s is then mostly time to first token, not decode speed (issue 27). None when they ran long enough, when
    `ignore_eos` made them run the budget, or when the record does not say."""
    mean = record.extra.get("mean_output_tokens")
    budget = record.generation.get("output_len")
    if record.generation.get("ignore_eos") or not isinstance(mean, int | float) or not isinstance(budget, int):
        return None
    if mean >= SHORT_OUTPUT_FRACTION * budget:
        return None
    return (f"outputs end after {mean:g} of {budget} tokens on average (the model stops early): its tok/s is "
            "mostly time to first token, not decode speed; measure with prompts that answer at length, or set "
            "ignore_eos = true on the workload")


def write_point(ledger: Ledger, record: LedgerRecord, files: Sequence[tuple[str, bytes]]) -> list[Path]:
    """Write the raw benchmark outputs beside the record, then the record that names them."""
    paths: list[Path] = []
    for name, data in files:
        target = ledger.root / record.artifact_id / name
        if not target.exists():
            write_atomic(target, data)
        paths.append(target)
    return [*paths, ledger.write(record)]
