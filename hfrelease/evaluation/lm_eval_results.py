"""lm-eval's results dict read into a `GateRun`: the gate's metric, its stderr, and each sample matched with
the finish reason the observing model classes saw (cut off, empty, failed)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.gate_run import GateRun
from hfrelease.manifest import Gate

RESPONSE_EXCERPT = 2000  # characters of each response kept in the ledger
FAILED_ANSWER = "[hfrelease: no answer, the request failed]"  # what a failed request's sample is scored on


def _none_placeholder() -> str:
    """The text lm-eval scores when an API model returned no answer (its own constant, read where it is defined)."""
    from lm_eval.models.api_models import LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER

    return str(LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER)


def split_metric(metric: str) -> tuple[str, str]:
    """lm-eval names a value "metric,filter" (e.g. exact_match,strict-match); no filter means "none"."""
    name, _, filter_key = metric.partition(",")
    return name, filter_key or "none"


def sample_hash(samples: Sequence[Mapping[str, Any]]) -> str:
    """lm-eval's task hash (EvaluationTracker.save_results_aggregated): sha256 of the concatenated
    doc/prompt/target hashes of the samples, so a record can be matched against lm-eval's own files."""
    joined = "".join(str(s["doc_hash"]) + str(s["prompt_hash"]) + str(s["target_hash"]) for s in samples)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()



def collect(gate: Gate, results: dict[str, Any], *, finish: Mapping[str, list[str]], requests: int,
            failures: Mapping[str, int]) -> GateRun:
    """The gate's `GateRun` from lm-eval's `results`; `finish`: the finish reasons seen by answer text,
    `requests`: the requests answered or failed, `failures`: failed requests by kind."""
    metric_name, filter_key = split_metric(gate.metric)
    task_results = results["results"]
    headline = task_results.get(gate.task) or results.get("groups", {}).get(gate.task)
    if headline is None or gate.metric not in headline:
        available = sorted(k for k in (headline or {}) if "," in k and "_stderr" not in k)
        raise MeasurementError(
            f"lm-eval reported no {gate.metric!r} for task {gate.task!r} (it reported: {', '.join(available)})",
            hint=f"Set gate {gate.id!r} metric to one of the names above.",
        )
    value = float(headline[gate.metric])
    stderr_raw = headline.get(f"{metric_name}_stderr,{filter_key}")
    stderr = float(stderr_raw) if isinstance(stderr_raw, int | float) else None
    metrics: dict[str, dict[str, float | None]] = {}
    for key, raw in headline.items():
        if "," in key and "_stderr" not in key and isinstance(raw, int | float):
            name, filt = split_metric(key)
            err = headline.get(f"{name}_stderr,{filt}")
            metrics[key] = {"value": float(raw), "stderr": float(err) if isinstance(err, int | float) else None}

    all_samples: dict[str, list[dict[str, Any]]] = results.get("samples", {})
    multi_task = len(all_samples) > 1
    samples: list[dict[str, Any]] = []
    truncated = empty = failed = 0
    pool = {text: list(reasons) for text, reasons in finish.items()}
    lm_samples: list[dict[str, Any]] = []
    for task_name, task_samples in sorted(all_samples.items()):
        for sample in task_samples:
            if sample.get("filter") != filter_key:
                continue
            lm_samples.append(sample)
            raw = sample.get("resps", [[None]])
            response = raw[0][0] if raw and raw[0] else None
            text = response if isinstance(response, str) else ""
            is_failed = text == FAILED_ANSWER or _failed_loglikelihood(raw)
            reasons = [] if is_failed else pool.get(text) or pool.get("") or []
            reason = reasons.pop(0) if reasons else ""
            is_truncated = reason == "length"
            # A failed request has no answer: it counts against max_truncated as an empty one does.
            is_empty = is_failed or (gate.api == "chat" and (not text.strip() or text == _none_placeholder()))
            truncated += is_truncated
            empty += is_empty
            failed += is_failed
            text = "" if is_failed else text
            score = sample.get(metric_name)
            samples.append(
                {
                    "doc_id": f"{task_name}/{sample['doc_id']}" if multi_task else str(sample["doc_id"]),
                    "score": float(score) if isinstance(score, int | float | bool) else 0.0,
                    "truncated": is_truncated,
                    "empty": is_empty,
                    "response": text[:RESPONSE_EXCERPT],
                    "target": str(sample.get("target"))[:200],
                }
            )
    kept = {k: results.get(k) for k in ("versions", "n-shot", "n-samples", "higher_is_better", "group_subtasks")}
    kept["results"] = {k: v for k, v in task_results.items()}
    return GateRun(
        value=value,
        stderr=stderr,
        metrics=metrics,
        samples=samples,
        n=len(samples),
        truncated=truncated,
        empty=empty,
        requests=requests,
        task_hash=sample_hash(lm_samples) if lm_samples else None,
        lm_eval=kept,
        failed=failed,
        failures=dict(failures),
    )


def _failed_loglikelihood(raw: Any) -> bool:
    """A log-likelihood sample one of whose requests failed (answered -inf, which no real log-probability is)."""
    return any(
        isinstance(resp, list | tuple) and resp and isinstance(resp[0], list | tuple) and resp[0]
        and isinstance(resp[0][0], float) and resp[0][0] == -math.inf
        for resp in raw or ()
    )  # fmt: skip
