"""Small real ledgers for `hfrelease compare` tests: `LedgerRecord`s written by `Ledger`, raw bench files beside them.

Scores are seeded and deterministic; each builder takes the few inputs a test changes (weights, versions,
serve flags, items) so a test states what differs between its two sides.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np

from hfrelease.compare.rows import RESAMPLES
from hfrelease.files.hashing import FileHash
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord, input_key
from hfrelease.ledger.store import Ledger

VERSIONS = {"python": "3.11.7", "vllm": "0.32.0+cpu", "lm_eval": "0.4.13", "hfrelease": "0.1.0"}


def sha(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _serve(flags: tuple[str, ...]) -> ServeRecord:
    argv = ("vllm", "serve", "/models/x", "--port", "8000", *flags)
    return ServeRecord(argv=argv, env={}, display=" ".join(("vllm", "serve", "org/x", *flags)))


def gate_record(
    *, family: str = "fam", artifact: str = "q0", gate: str = "arith", accuracy: float, n: int = 60,
    seed: str = "a", items: str = "v1", weights: str = "w1", vllm: str = "0.32.0+cpu",
    flags: tuple[str, ...] = (), max_tokens: int = 64, step: int = 0, metric: str = "exact_match,answer",
    run_seed: int = 1234, temperature: float = 0.0,
) -> LedgerRecord:
    """A gate record of `n` 0/1 samples, each right with probability `accuracy` (seeded by `seed`);
    `run_seed` is the run's own seed (a gate with `seeds` has one record per seed)."""
    rng = random.Random(f"{gate}:{artifact}:{seed}")  # noqa: S311 - reproducible made-up scores
    prefix = "" if items == "v1" else f"{items}-"
    scores = [1.0 if rng.random() < accuracy else 0.0 for _ in range(n)]
    samples = tuple(Sample(doc_id=f"{prefix}{i}", score=s, truncated=False, empty=False) for i, s in enumerate(scores))
    value = sum(scores) / n
    generation = {"max_tokens": max_tokens, "temperature": temperature}
    return LedgerRecord(
        kind="gate", family=family, artifact_id=artifact, artifact_hash=sha("weights", weights),
        artifact_files=(FileHash(path="model.safetensors", size=10, sha256=sha("weights", weights)),),
        subject_id=gate, harness="lm-eval", task=f"demo_{gate}", task_hash=sha("task", items), mode="thinking",
        n=n, seed=run_seed, generation=generation, metrics={metric: Metric(value=value)}, samples=samples,
        truncated=0, empty=0, serve=_serve(flags), versions={**VERSIONS, "vllm": vllm}, hardware={"cpu_count": 2},
        started_at=f"2026-11-0{1 + step}T10:00:00Z", duration_s=1.0,
        input_key=input_key(a=artifact, g=gate, w=weights, v=vllm, f=list(flags), i=items, m=max_tokens, s=seed,
                            r=run_seed, t=temperature),
        extra={"metric": metric, "value": value},
    )


def write_speed(
    ledger: Ledger, *, family: str = "fam", artifact: str = "ref", workload: str = "chat", speculative: str = "draft",
    draft: str | None = "draft", draft_weights: str = "d1", throughputs: tuple[float, ...],
    acceptances: tuple[float, ...] = (), step: int = 0, raw: bool = True, cpu: str = "AMD EPYC",
) -> LedgerRecord:
    """A speed record whose value is the median of `throughputs` (one raw bench result per repeat); the same
    arguments but `step` and the figures give the same input key, recorded in another session."""
    names = []
    for i, throughput in enumerate(throughputs):
        result = {"output_throughput": throughput, "completed": 8}
        if acceptances:
            result |= {"spec_decode_acceptance_rate": 100 * acceptances[i], "spec_decode_acceptance_length": 1.5}
        data = (json.dumps(result) + "\n").encode()
        digest = hashlib.sha256(data).hexdigest()[:12]
        name = f"speed-{workload}-{sha(speculative, draft_weights)[:12]}-{digest}.bench.jsonl"
        if raw:
            (ledger.root / artifact).mkdir(parents=True, exist_ok=True)
            (ledger.root / artifact / name).write_bytes(data)
        names.append(name)
    ordered = sorted(throughputs)
    metrics = {"output_throughput": Metric(value=ordered[len(ordered) // 2])}
    if acceptances:
        metrics["spec_acceptance_rate"] = Metric(value=sorted(acceptances)[len(acceptances) // 2])
    record = LedgerRecord(
        kind="speed", family=family, artifact_id=artifact, artifact_hash=sha("weights", "r1"),
        artifact_files=(FileHash(path="model.safetensors", size=10, sha256=sha("weights", "r1")),),
        draft_artifact_id=draft, draft_hash=sha("weights", draft_weights) if draft else None,
        subject_id=workload, harness="vllm-bench", task="prompts/chat.jsonl", task_hash=sha("prompts"),
        mode="non-thinking", n=8, seed=0, generation={"output_len": 32}, metrics=metrics, truncated=0, empty=0,
        serve=_serve(()), versions=VERSIONS, hardware={"cpu": cpu, "cpu_count": 2},
        started_at=f"2026-11-0{1 + step}T11:00:00Z",
        duration_s=1.0, input_key=input_key(a=artifact, w=workload, s=speculative, d=draft_weights),
        extra={"speculative": speculative, "concurrency": 1, "repeats": len(throughputs), "raw": names},
    )
    ledger.write(record)
    return record


def write_ledger(root: Path, *records: LedgerRecord) -> Ledger:
    ledger = Ledger(root)
    root.mkdir(parents=True, exist_ok=True)
    for record in records:
        ledger.write(record)
    return ledger


def median_interval(old: list[float], new: list[float]) -> tuple[float, float]:
    """The 95 % interval of median(new) - median(old) the command gives, from the same draws."""
    # The same draws the command makes (one generator, seed 0, old side first), written out again here.
    rng = np.random.default_rng(0)
    a, b = np.array(old), np.array(new)
    old_means = np.median(a[rng.integers(0, len(a), size=(RESAMPLES, len(a)))], axis=1)
    new_means = np.median(b[rng.integers(0, len(b), size=(RESAMPLES, len(b)))], axis=1)
    low, high = np.quantile(new_means - old_means, [0.025, 0.975])
    return float(low), float(high)
