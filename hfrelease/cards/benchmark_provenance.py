"""A card's benchmark provenance: how each gate and workload was measured (harness, task, n, seeds,
sampling, thresholds, dates) and the machines and versions it ran on, each said once.

Not to be confused with the number provenance (`numbers.py`, each printed number's records) or the
ledger's record of the installed environment (`hfrelease.ledger.provenance`), which this reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfrelease.cards.measurements import FamilyMeasurements
from hfrelease.cards.numbers import DASH, TIMES
from hfrelease.cards.reproduce import gate_command, shipped_command, workload_command
from hfrelease.cards.speed_tables import sampling
from hfrelease.cards.text import Markdown, code_span, escape_markdown
from hfrelease.cards.view import Context
from hfrelease.files.rules import GATES_DIR, gate_command_files, prompt_repo_path
from hfrelease.manifest import Artifact, Gate, Manifest
from hfrelease.serving.kernels import isa_name


def benchmark_provenance(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> Context:
    """Benchmark provenance as one line per gate and workload (a list never outgrows the card's column,
    where a 13-column table did), and the machines and versions they ran on, each said once."""
    gates, machines, commands = [], [], []
    hardwares: list[Mapping[str, Any]] = []
    for gate in manifest.gate:
        results = [r for (aid, gid), r in measured.gates.items() if gid == gate.id]
        if not results:
            continue
        records = [e.record for r in results for e in r.entries]
        ns = sorted({r.n for r in records})
        dates = sorted(r.started_at[:10] for r in records)
        generation = records[0].generation
        settings = [f"{key} {generation[key]}" for key in ("temperature", "top_p", "num_fewshot")
                    if generation.get(key) is not None]
        harness = _harness(records[0].harness, records[0].versions)
        task = code_span(gate.task or " ".join(shipped_command(manifest, gate) or []) or gate.entry_point
                         or gate.fidelity or gate.id)
        parts = [f"{harness}, {task}, metric {code_span(gate.metric)}, {escape_markdown(gate.mode)}",
                 escape_markdown(f"n {'/'.join(map(str, ns))}" + (f" (limit {gate.limit})" if gate.limit
                                                                   else " (full set)")),
                 escape_markdown(_seeds(gate) + f", max tokens {gate.max_tokens}"
                                 + "".join(f", {x}" for x in settings)),
                 escape_markdown(_thresholds(gate)),
                 escape_markdown("measured " + _dates(dates))]
        label = f"**{escape_markdown(gate.label or gate.id)}**"
        if gate.description:
            label += f": {escape_markdown(gate.description)}"
        gates.append(Markdown(f"{label}; " + "; ".join(parts)))
        command = gate_command(manifest, gate, artifact) if artifact.kind != "draft" else None
        if command is not None:
            program = "(`lm_eval`)" if gate.task is not None else "(custom gate)"
            commands.append({"label": Markdown(f"**{escape_markdown(gate.label or gate.id)}** {program}"),
                             "code": command})
        machines += [(_hardware(r.hardware), _versions(r.versions)) for r in records]
        hardwares += [r.hardware for r in records]
    workloads = []
    for workload in manifest.workload:
        points = measured.points(workload_id=workload.id)
        if not points:
            continue
        dates = sorted(p.entry.record.started_at[:10] for p in points)
        prompts = code_span(prompt_repo_path(workload.prompts))
        # A config the manifest declares that no record measured yet (one added since): said, not listed as
        # measured beside the dates.
        recorded = {p.speculative for p in points}
        configs = ", ".join(s for s in workload.speculative if s in recorded)
        pending = [s for s in workload.speculative if s not in recorded]
        if pending:
            configs += f" ({', '.join(pending)}: declared, not measured yet)"
        text = (f"**{escape_markdown(workload.label or workload.id)}**: prompts {prompts} (in this repo), "
                + escape_markdown(f"output {'exactly ' if workload.ignore_eos else 'up to '}{workload.output_len} "
                                  f"tokens, thinking {'on' if workload.thinking else 'off'}, {sampling(workload)}, "
                                  f"{workload.repeats} "
                                  f"repeats, concurrency {', '.join(map(str, workload.concurrency))}, configs "
                                  f"{configs}; measured {_dates(dates)}"))
        workloads.append(Markdown(text))
        served = artifact if artifact.kind != "draft" or artifact.draft is None else manifest.artifact_by_id(
            artifact.draft.target)
        commands.append({"label": Markdown(f"**{escape_markdown(workload.label or workload.id)}** "
                                           "(`vllm bench serve`, batch 1)"),
                         "code": workload_command(manifest, workload, served)})
        machines += [(_hardware(p.entry.record.hardware), _versions(p.entry.record.versions)) for p in points]
        hardwares += [p.entry.record.hardware for p in points]
    environments = [escape_markdown(f"{hardware}; {versions}") for hardware, versions in dict.fromkeys(machines)]
    kernels = any("vllm_kernels" in hardware for hardware in hardwares)
    programs = any(path.startswith(f"{GATES_DIR}/") for g in manifest.gate
                   for path in gate_command_files(manifest, g).values())
    return {"gates": gates, "workloads": workloads, "environments": environments, "cpu_kernels": kernels,
            "commands": commands, "gate_programs": programs}


def _seeds(gate: Gate) -> str:
    if gate.seeds is None:
        return f"seed {gate.seed}"
    return f"seeds {', '.join(map(str, gate.seeds))} (one run each, items averaged over them)"


def _thresholds(gate: Gate) -> str:
    if gate.is_fidelity:
        return ", ".join(f"{name} {value:g}" for name, value in (("max KL", gate.max_kl),
                                                                 ("max flip rate", gate.max_flip_rate))
                         if value is not None)
    return (f"margin {gate.margin:g}" + (f", floor {gate.floor:g}" if gate.floor is not None else "")
            + (f", minimum recovery {gate.min_recovery:g}" if gate.min_recovery else ""))


def _dates(dates: list[str]) -> str:
    return dates[0] if dates[0] == dates[-1] else f"{dates[0]} {DASH} {dates[-1]}"


def _harness(harness: str, versions: Mapping[str, str]) -> str:
    if harness == "lm-eval":
        return f"lm-eval {versions.get('lm_eval', '(version not recorded)')}"
    if harness == "vllm-bench":
        return f"vllm bench serve {versions.get('vllm', '')}".strip()
    if harness == "fidelity":
        return f"prompt logprobs through vLLM {versions.get('vllm', '')}".strip()
    return "custom harness"


def _hardware(info: Mapping[str, Any]) -> str:
    gpus = info.get("gpus")
    if isinstance(gpus, list) and gpus:
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)})
        return f"{len(gpus)}{TIMES} {', '.join(names)}"
    return f"{info.get('cpu', 'unknown CPU')} ({info.get('cpu_count', '?')} cores{_isa(info)})"


def _isa(info: Mapping[str, Any]) -> str:
    """", AVX2, served on vLLM's _C_AVX2 kernels" (what measured it), or the CPU's ISA alone for a record of an
    attached server; nothing for a record from before the ISA was recorded."""
    cpu = isa_name(info.get("cpu_isa"))
    kernels = info.get("vllm_kernels")
    served = f"served on vLLM's {'+'.join(map(str, kernels))} kernels" if isinstance(kernels, list) and kernels else ""
    return "".join(f", {part}" for part in (cpu, served) if part)


def _versions(versions: Mapping[str, str]) -> str:
    named = [f"{k} {versions[k]}" for k in ("vllm", "lm_eval", "hfrelease", "torch", "transformers") if k in versions]
    if "lock_sha256" in versions:  # the release workflow's locked environment (hfrelease.ledger.provenance)
        named.append(f"installed from {versions.get('lock', 'a lock file')} (sha256 {versions['lock_sha256'][:12]})")
    return ", ".join(named)
