"""Synthetic ledger records for card tests: real `LedgerRecord`s with made-up, deterministic numbers.

Used by the fixture generator (tests/fixtures/ledger_demo/generate.py) and by tests that need a ledger
for a manifest on the fly (the Nanbeige family). Numbers are invented but shaped like the real ones:
paired per-sample scores, medians over repeats, per-position acceptance that decays with position.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from hfrelease.files.hashing import FileHash
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord, input_key
from hfrelease.manifest import Gate, Manifest, Workload
from hfrelease.serving.command import build_serve_command

START = datetime(2026, 7, 20, 9, 0, tzinfo=UTC)
VERSIONS = {"python": "3.11.9", "vllm": "0.25.1", "lm_eval": "0.4.13", "hfrelease": "0.1.0"}
HARDWARE = {"cpu": "AMD EPYC 9654", "cpu_count": 2, "memory_bytes": 8_000_000_000,
            "gpus": [{"name": "NVIDIA GeForce RTX 5090", "driver": "575.51"}], "gpu_count": 1}


def _sha(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _files(artifact_id: str, size: int) -> tuple[FileHash, ...]:
    return (FileHash(path="model.safetensors", size=size, sha256=_sha("weights", artifact_id)),)


def _when(step: int) -> str:
    return (START + timedelta(minutes=17 * step)).strftime("%Y-%m-%dT%H:%M:%SZ")


def gate_record(
    manifest: Manifest, artifact_id: str, gate: Gate, *, accuracy: float, agreement: float, step: int,
    size: int, n: int | None = None, void_reason: str | None = None, run: int | None = None,
) -> LedgerRecord:
    """A gate record whose per-sample scores agree with the reference's on a share `agreement` of docs.

    `run`: the seed of one of a seeded gate's runs (`gate` is then that run: `seed` set), which varies the
    made-up answers from run to run."""
    if gate.is_fidelity:
        return _fidelity_record(manifest, artifact_id, gate, agreement=agreement, step=step, size=size)
    artifact = manifest.artifact_by_id(artifact_id)
    n = n or gate.limit or 50
    tag = "" if run is None else f":seed{run}"
    # Seeded, reproducible noise for made-up scores, not cryptography.
    ref_rng = random.Random(f"{manifest.family.name}:{gate.id}{tag}")  # noqa: S311
    reference = [1.0 if ref_rng.random() < 0.7 else 0.0 for _ in range(n)]
    rng = random.Random(f"{manifest.family.name}:{gate.id}:{artifact_id}{tag}")  # noqa: S311
    scores = []
    for ref in reference:
        if rng.random() < agreement:
            scores.append(ref)
        else:
            scores.append(1.0 if rng.random() < accuracy else 0.0)
    samples = tuple(Sample(doc_id=str(i), score=s, truncated=False, empty=False) for i, s in enumerate(scores))
    value = sum(scores) / n
    command = build_serve_command(manifest, artifact, model=artifact.repo)
    key = input_key(artifact=artifact_id, gate=gate.id, family=manifest.family.name,
                    **({"seed": run} if run is not None else {}))
    return LedgerRecord(
        kind="gate", family=manifest.family.name, artifact_id=artifact_id, artifact_hash=_sha("weights", artifact_id),
        artifact_files=_files(artifact_id, size), subject_id=gate.id,
        harness="lm-eval" if gate.task else "custom", task=gate.task or gate.id, task_hash=_sha("task", gate.id),
        mode=gate.mode, n=n, seed=gate.seed,
        generation={"max_tokens": gate.max_tokens, "temperature": gate.temperature, "top_p": gate.top_p,
                    "limit": gate.limit, "num_fewshot": gate.num_fewshot, "api": gate.api},
        metrics={gate.metric: Metric(value=value, stderr=round((value * (1 - value) / n) ** 0.5, 6))},
        samples=samples, truncated=0, empty=0,
        serve=ServeRecord(argv=command.argv, env=dict(command.env), display=command.display()),
        versions=VERSIONS, hardware=HARDWARE, started_at=_when(step), duration_s=42.0 + step,
        input_key=key, extra={"metric": gate.metric, "value": value, "memory": gpu_memory(size)},
        status="void" if void_reason else "ok", void_reason=void_reason,
    )


def _fidelity_record(
    manifest: Manifest, artifact_id: str, gate: Gate, *, agreement: float, step: int, size: int, n: int = 12,
) -> LedgerRecord:
    """A fidelity gate's record, shaped like `hfrelease.evaluation.fidelity`'s: per prompt its mean KL (the
    score), flip rate, first divergence and positions; the reference's own scoring is 0 everywhere. The
    further `agreement` is below 1, the larger the KL and the flips."""
    from hfrelease.evaluation.fidelity import PromptFidelity, summarize

    artifact = manifest.artifact_by_id(artifact_id)
    reference = artifact.kind == "reference"
    rng = random.Random(f"{manifest.family.name}:{gate.id}:{artifact_id}")  # noqa: S311 - made-up figures
    positions = gate.max_tokens
    figures = []
    for i in range(n):
        drift = 0.0 if reference else (1.0 - agreement) * (0.5 + rng.random())
        flips = 0 if reference else round(positions * drift * rng.random())
        figures.append(PromptFidelity(doc_id=str(i), kl=round(0.02 * drift, 6), flip_rate=flips / positions,
                                      first_divergence=rng.randrange(positions) if flips else None,
                                      positions=positions))
    samples = tuple(Sample(doc_id=f.doc_id, score=f.kl, truncated=False, empty=False, flip_rate=f.flip_rate,
                           first_divergence=f.first_divergence, positions=f.positions) for f in figures)
    command = build_serve_command(manifest, artifact, model=artifact.repo)
    return LedgerRecord(
        kind="gate", family=manifest.family.name, artifact_id=artifact_id, artifact_hash=_sha("weights", artifact_id),
        artifact_files=_files(artifact_id, size), subject_id=gate.id, harness="fidelity", task=gate.fidelity or gate.id,
        task_hash=_sha("prompts", gate.id), mode="non-thinking", n=n, seed=gate.seed,
        generation={"max_tokens": gate.max_tokens, "temperature": 0.0, "top_k": gate.top_k or 20},
        metrics={name: Metric(value=value) for name, value in summarize(figures).items()},
        samples=samples, truncated=0, empty=0,
        serve=ServeRecord(argv=command.argv, env=dict(command.env), display=command.display()),
        versions=VERSIONS, hardware=HARDWARE, started_at=_when(step), duration_s=12.0,
        input_key=input_key(artifact=artifact_id, gate=gate.id, family=manifest.family.name),
        extra={"metric": "kl", "value": summarize(figures)["kl"], "memory": gpu_memory(size)},
    )


def gpu_memory(weight_bytes: int) -> dict[str, Any]:
    """What a GPU server's start-up log says (see hfrelease.serving.memory), for weights of this size:
    a 64k context with an fp8 KV cache of 32 KiB per token, and host RAM of the server's processes."""
    return {"weights_gib": round(weight_bytes / 2**30, 2), "kv_cache_gib": 12.0, "kv_cache_tokens": 393_216,
            "kv_device": "GPU", "max_model_len": 65_536, "peak_pss_bytes": 3 * 2**30 + weight_bytes // 8,
            "pss_samples": 40}


def speed_record(
    manifest: Manifest, artifact_id: str, workload: Workload, speculative: str, concurrency: int, *,
    throughput: float, step: int, size: int, acceptance: float | None = None, input_len: int | None = None,
) -> LedgerRecord:
    """A speed record: medians over repeats; with acceptance when a speculative config served; `input_len`:
    a point of the workload's context sweep (a "speed-sweep" record)."""
    artifact = manifest.artifact_by_id(artifact_id)
    spec = next((s for s in manifest.speculative if s.id == speculative), None)
    draft = manifest.artifact_by_id(spec.draft) if spec is not None and spec.draft else None
    command = build_serve_command(manifest, artifact, model=artifact.repo, speculative=spec,
                                  draft_model=draft.repo if draft else None)
    itl = 1000.0 / throughput * concurrency
    metrics: dict[str, Metric] = {
        "output_throughput": Metric(value=round(throughput, 3)),
        "ttft_median_ms": Metric(value=round(35.0 + 4 * concurrency + (input_len or 0) / 100, 3)),
        "ttft_p90_ms": Metric(value=round(48.0 + 6 * concurrency, 3)),
        "ttft_p99_ms": Metric(value=round(60.0 + 9 * concurrency, 3)),
        "itl_median_ms": Metric(value=round(itl, 3)),
        "itl_p90_ms": Metric(value=round(itl * 1.2, 3)),
        "itl_p99_ms": Metric(value=round(itl * 1.5, 3)),
        "tpot_median_ms": Metric(value=round(itl * 1.05, 3)),
        "e2el_median_ms": Metric(value=round(itl * workload.output_len, 3)),
    }
    if spec is not None and acceptance is not None:
        k = spec.num_speculative_tokens
        drafts = 1000
        per_pos = [round(acceptance * (0.62 ** i), 4) for i in range(k)]
        accepted = round(sum(per_pos) * drafts)
        metrics.update({
            "spec_acceptance_rate": Metric(value=round(accepted / (drafts * k), 4)),
            "spec_mean_acceptance_length": Metric(value=round(1 + accepted / drafts, 4)),
            "spec_drafts": Metric(value=drafts), "spec_draft_tokens": Metric(value=drafts * k),
            "spec_accepted_tokens": Metric(value=accepted),
        })
        for i, rate in enumerate(per_pos):
            metrics[f"spec_acceptance_pos_{i}"] = Metric(value=rate)
            previous = per_pos[i - 1] if i else 1.0
            metrics[f"spec_conditional_acceptance_pos_{i}"] = Metric(value=round(rate / previous, 4))
    sweep = {"input_len": input_len} if input_len else {}
    return LedgerRecord(
        kind="speed-sweep" if input_len else "speed", family=manifest.family.name, artifact_id=artifact_id,
        artifact_hash=_sha("weights", artifact_id), artifact_files=_files(artifact_id, size),
        draft_artifact_id=draft.id if draft else None, draft_hash=_sha("weights", draft.id) if draft else None,
        subject_id=workload.id, harness="vllm-bench", task=workload.prompts, task_hash=_sha("prompts", workload.id),
        mode="thinking" if workload.thinking else "non-thinking", n=workload.num_prompts or 16, seed=0,
        generation={"output_len": workload.output_len, "temperature": workload.temperature},
        metrics=metrics, truncated=0, empty=0,
        serve=ServeRecord(argv=command.argv, env=dict(command.env), display=command.display()),
        versions=VERSIONS, hardware=HARDWARE, started_at=_when(step), duration_s=30.0,
        input_key=input_key(artifact=artifact_id, workload=workload.id, spec=speculative, c=concurrency, **sweep),
        extra={"speculative": speculative, "concurrency": concurrency, "repeats": workload.repeats, **sweep,
               "spread": {"output_throughput": [round(throughput * 0.97, 3), round(throughput * 1.02, 3)]},
               "failed": 0, "raw": [f"{workload.id}-{speculative}-c{concurrency}-r{i}.json"
                                    for i in range(workload.repeats)]},
    )


def family_ledger(
    manifest: Manifest, *, quality: Mapping[str, tuple[float, float]], speed: Mapping[str, float],
    sizes: Mapping[str, int], with_speed: bool = True,
) -> list[LedgerRecord]:
    """Every gate of every gated artifact, and (optionally) every speed point the workloads declare.

    `quality[artifact] = (accuracy, agreement with the reference)`, `speed[artifact] = batch-1 tok/s
    without speculation`.
    """
    from hfrelease.evaluation.plan import gate_artifacts
    from hfrelease.verdicts.seeds import seed_runs

    records: list[LedgerRecord] = []
    step = 0
    for gate in manifest.gate:
        for artifact_id in gate_artifacts(manifest, gate):
            accuracy, agreement = quality[artifact_id]
            for run in seed_runs(gate):  # one record per seed of a gate with `seeds`
                records.append(gate_record(manifest, artifact_id, run, accuracy=accuracy, agreement=agreement,
                                           step=step, size=sizes[artifact_id],
                                           run=run.seed if gate.seeds is not None else None))
                step += 1
    if not with_speed:
        return records
    boosts = {"ngram": (1.35, 0.55), "draft": (1.6, 0.8), "eagle3": (1.25, 0.61)}
    for workload in manifest.workload:
        targets = workload.artifacts or [a.id for a in manifest.artifact if a.kind != "draft"]
        records += _matrix_records(manifest, workload, targets, speed=speed, sizes=sizes, step=10_000 + step)
        for artifact_id in targets:
            for spec in workload.speculative:
                for concurrency in workload.concurrency:
                    boost, acceptance = boosts.get(spec, (1.0, None)) if spec != "none" else (1.0, None)
                    scale = concurrency ** 0.8
                    records.append(speed_record(
                        manifest, artifact_id, workload, spec, concurrency,
                        throughput=speed[artifact_id] * boost * scale, step=step, size=sizes[artifact_id],
                        acceptance=acceptance))
                    step += 1
                for length in workload.input_lens or []:  # the context sweep: slower as the context grows
                    boost, acceptance = boosts.get(spec, (1.0, None)) if spec != "none" else (1.0, None)
                    records.append(speed_record(
                        manifest, artifact_id, workload, spec, 1, input_len=length,
                        throughput=speed[artifact_id] * boost / (1 + length / 32768), step=step,
                        size=sizes[artifact_id], acceptance=acceptance))
                    step += 1
    return records


def _matrix_records(manifest: Manifest, workload: Workload, targets: list[str], *, speed: Mapping[str, float],
                    sizes: Mapping[str, int], step: int) -> list[LedgerRecord]:
    """The draft x target matrix's points: a `matrix = true` draft's configs on every other non-draft artifact
    (taken as compatible: the synthetic family has no files), with and without speculation, at the
    workload's lowest concurrency; acceptance a little lower the further the target is from the trained one."""
    records: list[LedgerRecord] = []
    concurrency = min(workload.concurrency)
    for spec in manifest.speculative:
        draft = manifest.artifact_by_id(spec.draft) if spec.draft else None
        if (draft is None or draft.draft is None or not draft.draft.matrix or spec.id not in workload.speculative
                or draft.draft.target not in targets):
            continue
        named = draft.draft.matrix if isinstance(draft.draft.matrix, list) else None
        for index, artifact in enumerate(a for a in manifest.artifact if a.kind != "draft" and a.id not in targets
                                         and (named is None or a.id in named)):
            for config, boost, acceptance in (("none", 1.0, None), (spec.id, 1.2 - 0.05 * index, 0.58 - 0.03 * index)):
                records.append(speed_record(manifest, artifact.id, workload, config, concurrency,
                                            throughput=speed[artifact.id] * boost, step=step, size=sizes[artifact.id],
                                            acceptance=acceptance))
                step += 1
    return records
