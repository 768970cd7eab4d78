"""The gates' results as Every Eval Ever records (schema 0.3.0, https://github.com/evaleval/every_eval_ever),
written beside each card and published with it, so others can read, compare and re-check them.

Per (artifact, accuracy gate) with a value: one aggregate record (`<uuid>.json`) with the score on its own
scale (fractions stay fractions), its uncertainty (the harness's standard error, or for a gate run under
several seeds the standard error of the items' seed-means, as the card states it; a 95 % percentile-bootstrap
interval over the items with its resample count), the generation settings, the eval library and version,
the serving engine and the ledger records it came from; and beside it the instance-level rows
(`<uuid>_samples.jsonl`), one per scored sample per seed, from the ledger's per-sample outcomes.

The ledger keeps each sample's outcome (its id in the task's dataset, the extracted answer, the target, the
score), not the prompt: `input.raw` is empty and `sample_id` indexes the task's dataset. A fidelity gate is a
distance from the family's reference, not a benchmark score, and is not exported. Where a paths lives:
`evidence.py`. The schema files the tests validate against: tests/fixtures/every_eval_ever/.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from hfrelease.cards.evidence import EEE_DIR, at_tag, record_dir, record_uuid
from hfrelease.cards.fidelity import accuracy_gates
from hfrelease.cards.frontmatter import hub_dataset, metric_id, metric_name
from hfrelease.cards.measurements import FamilyMeasurements, GateResult
from hfrelease.ledger.record import Sample
from hfrelease.manifest import Artifact, Gate, Manifest

SCHEMA_VERSION = "0.3.0"
RESAMPLES = 10_000  # the bootstrap's resamples, as many as the gate verdict's paired bootstrap draws
CONFIDENCE = 0.95


def export_files(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> dict[str, str]:
    """`every_eval_ever/data/.../<uuid>.json` and `<uuid>_samples.jsonl` of each accuracy gate measured on
    `artifact` with a value (a void record has no score to export)."""
    files: dict[str, str] = {}
    for gate in accuracy_gates(manifest):
        result = measured.gate(artifact.id, gate.id)
        if result is None or result.value is None:
            continue
        names = [e.name for e in result.entries]
        folder = f"{EEE_DIR}/{record_dir(artifact, gate)}"
        uuid = record_uuid(artifact, gate, names)
        evaluation_id = f"{gate.id}/{artifact.repo}/{_epoch(result)}"
        rows = _instances(artifact, gate, result, evaluation_id)
        samples = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)
        record = _aggregate(manifest, artifact, gate, result, evaluation_id)
        if rows:
            record["detailed_evaluation_results"] = {
                "format": "jsonl",
                "file_path": f"{record_dir(artifact, gate)}/{uuid}_samples.jsonl",
                "hash_algorithm": "sha256",
                "checksum": hashlib.sha256(samples.encode()).hexdigest(),
                "total_rows": len(rows),
            }
            files[f"{folder}/{uuid}_samples.jsonl"] = samples
        files[f"{folder}/{uuid}.json"] = json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return files


def _epoch(result: GateResult) -> str:
    """The newest run's start as Unix time (the schema's `retrieved_timestamp`): the record is the ledger's,
    so it is dated by the measurement, and an unchanged ledger re-renders the same bytes."""
    newest = max(e.record.started_at for e in result.entries)
    return str(int(datetime.fromisoformat(newest).timestamp()))


def _aggregate(
    manifest: Manifest, artifact: Artifact, gate: Gate, result: GateResult, evaluation_id: str
) -> dict[str, Any]:
    record = result.entry.record
    owner = artifact.repo.split("/", 1)[0]
    authors = manifest.family.authors
    ledger = [at_tag(manifest, artifact, f"ledger/{e.name.rsplit('/', 1)[-1]}") for e in result.entries]
    library = (
        {"name": "lm_eval", "version": record.versions.get("lm_eval", "unknown")}
        if record.harness == "lm-eval"
        else {
            "name": f"hfrelease {record.harness} gate",
            "version": record.versions.get("hfrelease", "unknown"),
            "additional_details": {"command": " ".join(gate.command or []) or str(gate.entry_point)},
        }
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "evaluation_timestamp": min(e.record.started_at for e in result.entries),
        "retrieved_timestamp": _epoch(result),
        "source_metadata": {
            "source_name": "hfrelease ledger",
            "source_type": "evaluation_run",
            "source_organization_name": authors[0].name if authors else owner,
            "source_organization_url": f"https://huggingface.co/{owner}",
            "evaluator_relationship": "first_party",
            "additional_details": {"ledger_records": " ".join(ledger), "release_tag": manifest.tag_name()},
        },
        "model_info": {
            "name": artifact.title or artifact.repo,
            "id": artifact.repo,
            "developer": owner,
            "inference_platform": "self-served (vLLM's OpenAI-compatible server)",
            "inference_engine": {"name": "vllm", "version": record.versions.get("vllm", "unknown")},
            "additional_details": {
                "deployment_type": "self_deployed",
                "model_availability": "open_weights",
                "artifact_sha256": record.artifact_hash,
                "hardware": _hardware(record.hardware),
            },
        },
        "eval_library": library,
        "evaluation_results": [
            {
                "evaluation_result_id": gate.id,
                "evaluation_name": gate.label or gate.id,
                "source_data": _source_data(gate, record.n, record.task_hash),
                "evaluation_timestamp": record.started_at,
                "metric_config": _metric_config(gate, result),
                "score_details": {
                    "score": result.value,
                    "uncertainty": _uncertainty(gate, result),
                    "details": {"ledger_records": " ".join(e.name for e in result.entries)},
                },
                "generation_config": {
                    "generation_args": {
                        "temperature": gate.temperature,
                        "top_p": gate.top_p,
                        "max_tokens": gate.max_tokens,
                        "reasoning": gate.mode == "thinking",
                        "execution_command": record.serve.display,
                    },
                    "additional_details": {
                        "mode": gate.mode,
                        "api": gate.api,
                        **(
                            {"seeds": ", ".join(str(s) for s in gate.seeds)} if gate.seeds else {"seed": str(gate.seed)}
                        ),
                        **({"limit": str(gate.limit)} if gate.limit is not None else {}),
                        **({"num_fewshot": str(gate.num_fewshot)} if gate.num_fewshot is not None else {}),
                    },
                },
            }
        ],
    }


def _hardware(hardware: object) -> str:
    if not isinstance(hardware, dict):
        return "unknown"
    return ", ".join(f"{k} {v if not isinstance(v, list) else ' '.join(map(str, v))}" for k, v in hardware.items())


def _source_data(gate: Gate, n: int, task_hash: str | None) -> dict[str, Any]:
    hub = hub_dataset(gate)
    if hub is not None:
        return {"dataset_name": gate.task, "source_type": "hf_dataset", "hf_repo": hub, "samples_number": n}
    details = {"task": gate.task} if gate.task else {"command": " ".join(gate.command or []) or str(gate.entry_point)}
    if task_hash:
        details["task_sha256"] = task_hash
    return {"dataset_name": gate.task or gate.id, "source_type": "other", "additional_details": details}


def _metric_config(gate: Gate, result: GateResult) -> dict[str, Any]:
    fraction = (
        all(0.0 <= s.score <= 1.0 for e in result.entries for s in e.samples)
        and result.value is not None
        and 0.0 <= result.value <= 1.0
    )
    _, _, filtered = gate.metric.partition(",")
    config: dict[str, Any] = {
        "metric_id": metric_id(gate.metric),
        "metric_name": metric_name(gate.metric),
        "lower_is_better": not gate.higher_is_better,
        "score_type": "continuous",
        "min_score": 0.0 if fraction else None,
        "max_score": 1.0 if fraction else None,
        "metric_parameters": {"filter": filtered or "none", "lm_eval_key": gate.metric},
    }
    if fraction:
        config["metric_unit"] = "proportion"
    if gate.description:
        config["evaluation_description"] = gate.description
    return config


def item_scores(result: GateResult) -> dict[str, float]:
    """Each item's score, its mean over the seeds for a gate run under several (items every run scored)."""
    from hfrelease.verdicts.seeds import item_means

    runs: dict[int, tuple[Sample, ...]] = {i: e.samples for i, e in enumerate(result.entries)}
    return item_means(runs, lambda s: s.score)[0] if all(runs.values()) else {}


def _uncertainty(gate: Gate, result: GateResult) -> dict[str, Any]:
    """Standard error as the card states it; the percentile-bootstrap interval of the mean over items, only
    where that mean is the recorded value (a custom gate's value may be another aggregate)."""
    import numpy as np

    uncertainty: dict[str, Any] = {}
    if result.stderr is not None:
        method = "analytic (the harness's)" if result.seeds == 1 else "standard error of the items' seed-means"
        uncertainty["standard_error"] = {"value": result.stderr, "method": method}
    scores = item_scores(result)
    if not scores:
        return uncertainty
    values = np.array([scores[k] for k in sorted(scores)], dtype=np.float64)
    uncertainty["num_samples"] = len(values)
    if result.value is None or abs(float(values.mean()) - result.value) > 1e-9:
        return uncertainty
    rng = np.random.default_rng(gate.seed)
    means = values[rng.integers(0, len(values), size=(RESAMPLES, len(values)))].mean(axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    uncertainty["confidence_interval"] = {
        "lower": round(float(low), 6),
        "upper": round(float(high), 6),
        "confidence_level": CONFIDENCE,
        "method": f"percentile bootstrap over the {len(values)} items (seed {gate.seed})",
    }
    uncertainty["num_bootstrap_samples"] = RESAMPLES
    return uncertainty


def _instances(artifact: Artifact, gate: Gate, result: GateResult, evaluation_id: str) -> list[dict[str, Any]]:
    """One instance-level row per sample of each run (seed), in the ledger's order."""
    _, _, filtered = gate.metric.partition(",")
    rows = []
    for entry in result.entries:
        for sample in entry.samples:
            answer = sample.response if sample.response is not None else ""
            rows.append(
                {
                    "schema_version": SCHEMA_VERSION,
                    "evaluation_id": evaluation_id,
                    "model_id": artifact.repo,
                    "evaluation_name": gate.label or gate.id,
                    "evaluation_result_id": gate.id,
                    "sample_id": sample.doc_id,
                    "interaction_type": "single_turn",
                    "input": {
                        "raw": "",
                        "reference": []
                        if sample.target is None
                        else [sample.target if isinstance(sample.target, str) else json.dumps(sample.target)],
                    },
                    "output": {"raw": [answer]},
                    "answer_attribution": [
                        {
                            "turn_idx": 0,
                            "source": "output.raw",
                            "extracted_value": answer,
                            "extraction_method": filtered or record_harness(entry.record.harness),
                            "is_terminal": True,
                        }
                    ],
                    "evaluation": {"score": sample.score, "is_correct": sample.score == 1.0},
                    "metadata": {
                        "seed": str(entry.record.seed),
                        "truncated": str(sample.truncated).lower(),
                        "empty": str(sample.empty).lower(),
                        "ledger_record": entry.name,
                    },
                }
            )
    return rows


def record_harness(harness: str) -> str:
    """How a sample's answer was taken when the metric names no filter: the harness's own scoring."""
    return f"{harness} scoring"
