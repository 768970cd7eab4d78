"""The ledger record of one gate run: its void reason, generation settings, serve command and provenance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfrelease import __version__
from hfrelease.errors import MeasurementError
from hfrelease.evaluation.fidelity_gate import (
    top_k,
)
from hfrelease.evaluation.gate_run import GateRun
from hfrelease.evaluation.lm_eval_command import generation_kwargs
from hfrelease.evaluation.plan import (
    GateJob,
    ServerJob,
)
from hfrelease.evaluation.utilization import Utilization
from hfrelease.ledger.provenance import hardware, versions
from hfrelease.ledger.record import VALUE_FROM_SAMPLES, LedgerRecord, Metric, Sample, ServeRecord, value_is_sample_mean
from hfrelease.manifest import Manifest
from hfrelease.redact import redact_env
from hfrelease.serving.command import ServeCommand


def gate_record(
    manifest: Manifest, job: ServerJob, gate_job: GateJob, run: GateRun, *, command: ServeCommand | None,
    base_url: str, started_at: str, duration: float, failure: MeasurementError | None = None,
    memory: Mapping[str, Any] | None = None, raw_name: str | None = None, schedule: Mapping[str, Any] | None = None,
    load: Utilization | None = None, served: Mapping[str, Any] | None = None,
) -> LedgerRecord:
    """The ledger record of one gate run; `memory` is the server's so far (start-up figures, peak PSS),
    absent for an attached server, whose processes hfrelease cannot see. `schedule`: how the gate ran beside
    the artifact's others (its budget of requests in flight, the gates beside it); `load`: the server's
    utilization from its first gate's start to this gate's end (all gates' requests, not this gate's alone)."""
    gate = gate_job.gate
    assert job.content is not None
    bad = run.truncated + run.empty
    void_reason = None
    if failure is not None:
        void_reason = f"the harness failed: {failure.message}"
    elif run.n == 0:
        void_reason = "no samples were scored"
    elif bad / run.n > gate.max_truncated and run.failed:
        how = ", ".join(f"{kind}: {count}" for kind, count in run.failures.items())
        void_reason = (
            f"{run.failed} of {run.n} requests failed after every attempt ({how}); with {run.truncated} cut off "
            f"and {run.empty - run.failed} empty, over the limit of {gate.max_truncated:.0%}: see the server's log"
        )
    elif bad / run.n > gate.max_truncated:
        # An empty answer the server ended itself (finish reason not "length": null or blank content, e.g. a
        # reasoning parser that took the whole answer as reasoning) is not a budget problem: more tokens
        # would not help, so it is not advised.
        unbudgeted = sum(1 for s in run.samples if s.get("empty") and not s.get("truncated")) - run.failed
        advice = [f"raise max_tokens for gate {gate.id!r}"] if run.truncated else []
        if unbudgeted > 0:
            advice.append(f"{unbudgeted} empty answer(s) were ended by the server, not the budget (null or blank "
                          "message content): check the reasoning parser and the chat template's thinking switch")
        void_reason = (
            f"{run.truncated} of {run.n} answers were cut off by the {gate.max_tokens}-token budget and "
            f"{run.empty} were empty (limit {gate.max_truncated:.0%}): {'; '.join(advice)}"
        )
    argv = list(command.argv) if command else ["(attached)", base_url]
    env = redact_env(dict(command.env)) if command else {}
    generation: dict[str, Any] = {**generation_kwargs(gate), "limit": gate.limit, "num_fewshot": gate.num_fewshot,
                                  "api": gate.api}
    extra: dict[str, Any] = {}
    if gate.is_fidelity:
        # Greedy continuations of max_tokens tokens, scored with top_k prompt logprobs through /v1/completions.
        generation = {"max_tokens": gate.max_tokens, "temperature": 0.0, "top_k_logprobs": top_k(gate),
                      "api": "completions", "prompts": gate.fidelity}
        extra = {"fidelity_raw": [raw_name] if raw_name else [],
                 "kl_approximation": "KL on the shared reported top-k support plus one rest bucket (a lower bound)"}
        if job.artifact.id != manifest.reference.id:
            extra["compared_with"] = manifest.reference.id
    return LedgerRecord(
        kind="gate",
        family=manifest.family.name,
        artifact_id=job.artifact.id,
        artifact_hash=job.content.sha256,
        artifact_files=job.content.files,
        subject_id=gate.id,
        harness="fidelity" if gate.is_fidelity else "lm-eval" if gate.task else "custom",
        task=gate.task or gate.fidelity or gate.id,
        task_hash=run.task_hash,
        mode=gate.mode,
        n=run.n,
        seed=gate.seed,
        generation=generation,
        metrics={k: Metric(value=v["value"] or 0.0, stderr=v["stderr"]) for k, v in run.metrics.items()},
        samples=tuple(Sample.model_validate(s) for s in run.samples),
        truncated=run.truncated,
        empty=run.empty,
        serve=ServeRecord(argv=tuple(argv), env=env, display=job.public.display()),
        versions={**versions(), "hfrelease": __version__},
        hardware=hardware(served=served),
        started_at=started_at,
        duration_s=round(duration, 3),
        input_key=gate_job.input_key,
        # `requests`: sent by this run; `resumed`: answers an interrupted run of the same inputs received.
        extra={"metric": gate.metric, "value": run.value, "requests": run.requests, "lm_eval": run.lm_eval,
               # The value is recomputed from the samples wherever they are read (hfrelease.ledger.record).
               **({VALUE_FROM_SAMPLES: "mean"}
                  if value_is_sample_mean(run.value, [float(x["score"]) for x in run.samples]) else {}),
               **({"resumed": run.resumed} if run.resumed else {}),
               **extra, **({"memory": dict(memory)} if memory else {}),
               **({"failed_requests": dict(run.failures)} if run.failures else {}),
               **({"schedule": dict(schedule)} if schedule else {}),
               **({"server_load": load.as_dict()} if load is not None else {})},
        status="void" if void_reason else "ok",
        void_reason=void_reason,
    )
