"""A card's "Measured on each hardware" section: the family's ledger beside each other hardware's ledger.

A family measured on more than one machine keeps one ledger per hardware: `results/`, where `hfrelease eval`
writes, and `results-<name>/` beside it, another machine's ledger brought back as it was written (the demo's
`results-h200/`, from a lent NVIDIA H200; `inputs.read_inputs` reads them). Each ledger is selected on its
own, as the card selects its own (`measure_family`: the newest content of each artifact in that ledger), and
the section puts them side by side: which hardware and vLLM measured each, every gate's value and every
speed point's output throughput, one column per hardware. The rest of the card is the family ledger's alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfrelease.cards.errors import CardError
from hfrelease.cards.inputs import CardInputs, HardwareLedger, RecordEntry
from hfrelease.cards.measurements import NONE, FamilyMeasurements, SpeedPoint, measure_family
from hfrelease.cards.text import Markdown, code_span
from hfrelease.cards.view import Context
from hfrelease.manifest import Artifact, Manifest
from hfrelease.serving.kernels import isa_name

_MISSING = "not measured"


def hardware_context(inputs: CardInputs, artifact: Artifact) -> Context | None:
    """The section's rows for `artifact`, or None when fewer than two ledgers hold a record of it."""
    if not inputs.hardwares:
        return None
    ledgers = [HardwareLedger(name=inputs.manifest.ledger_dir.name, entries=inputs.records), *inputs.hardwares]
    columns: list[tuple[HardwareLedger, FamilyMeasurements]] = []
    for ledger in ledgers:
        # Another machine's ledger holds what was measured there: an artifact added to the family since (the demo's
        # NVFP4 quant and trained EAGLE-3 head, after its H200 session) is left out of that column, not missing.
        own = ledger.entries is inputs.records
        manifest = inputs.manifest if own else _as_recorded(inputs.manifest, ledger.entries)
        try:
            measured = measure_family(CardInputs(manifest=manifest, records=ledger.entries))
        except CardError as exc:
            raise CardError(f"ledger {ledger.name}/: {exc}", hint=exc.hint) from exc
        if _entries(measured, artifact):
            columns.append((ledger, measured))
    if len(columns) < 2:
        return None
    return {
        "hardwares": [_column(ledger, measured, artifact) for ledger, measured in columns],
        "gates": _gate_rows(inputs, artifact, [m for _, m in columns]),
        "speed": _speed_rows(artifact, [m for _, m in columns]),
    }


def _as_recorded(manifest: Manifest, entries: tuple[RecordEntry, ...]) -> Manifest:
    """`manifest` cut to the artifacts `entries` hold a record of (the reference always kept), the gates they
    recorded, and the speculative configs and workloads of those artifacts."""
    recorded = {e.record.artifact_id for e in entries} | {e.record.draft_artifact_id for e in entries}
    artifacts = [a for a in manifest.artifact if a.id in recorded or a.id == manifest.reference.id]
    kept = {a.id for a in artifacts}
    gates = {e.record.subject_id for e in entries if e.record.kind == "gate"}
    configs = [s for s in manifest.speculative if s.draft is None or s.draft in kept]
    names = {s.id for s in configs} | {NONE}
    workloads = []
    for workload in manifest.workload:
        served = [a for a in workload.artifacts if a in kept] if workload.artifacts is not None else None
        if served != []:
            workloads.append(workload.model_copy(update={
                "artifacts": served, "speculative": [c for c in workload.speculative if c in names]}))
    return manifest.model_copy(update={"artifact": artifacts, "gate": [g for g in manifest.gate if g.id in gates],
                                       "speculative": configs, "workload": workloads})


def describe_hardware(info: Mapping[str, Any]) -> str:
    """ "1x NVIDIA H200" or "AMD EPYC 7B13 (2 cores, AVX2, vLLM's _C_AVX2 kernels)": what measured a record."""
    gpus = info.get("gpus")
    if isinstance(gpus, list) and gpus:
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)})
        return f"{len(gpus)}x {', '.join(names)}"
    kernels = info.get("vllm_kernels")
    parts = [
        f"{info.get('cpu_count', '?')} cores",
        isa_name(info.get("cpu_isa")),
        f"vLLM's {'+'.join(map(str, kernels))} kernels" if isinstance(kernels, list) and kernels else "",
    ]
    return f"{info.get('cpu', 'unknown CPU')} ({', '.join(p for p in parts if p)})"


def _entries(measured: FamilyMeasurements, artifact: Artifact) -> list[RecordEntry]:
    gates = [e for r in measured.gates.values() if r.artifact_id == artifact.id for e in r.entries]
    return gates + [p.entry for p in _points(measured, artifact)]


def _points(measured: FamilyMeasurements, artifact: Artifact) -> list[SpeedPoint]:
    # A draft's own speed points are its target's, served with it.
    if artifact.kind == "draft":
        return measured.points(draft_id=artifact.id)
    return measured.points(artifact_id=artifact.id)


def _column(ledger: HardwareLedger, measured: FamilyMeasurements, artifact: Artifact) -> Context:
    newest = max(_entries(measured, artifact), key=lambda e: (e.record.started_at, e.name))
    versions = newest.record.versions
    named = [f"{k} {versions[k]}" for k in ("vllm", "torch") if k in versions]
    info = newest.record.hardware
    # A draft's records are its target's, served with it: the draft's own weights are `draft_hash`.
    content = newest.record.draft_hash if artifact.kind == "draft" else newest.record.artifact_hash
    listed = info.get("gpus")
    gpus = [str(g.get("name")) for g in listed if isinstance(g, dict)] if isinstance(listed, list) else []
    return {
        "short": " + ".join(sorted(set(gpus))) or f"CPU ({isa_name(info.get('cpu_isa')) or 'x86'})",
        "hardware": describe_hardware(info),
        "ledger": code_span(f"{ledger.name}/"),
        "versions": ", ".join(named) or _MISSING,
        "content": code_span(content[:12]) if content else _MISSING,
        "measured_at": newest.record.started_at[:10],
    }


def _gate_rows(inputs: CardInputs, artifact: Artifact, columns: list[FamilyMeasurements]) -> list[Context]:
    rows = []
    for gate in inputs.manifest.gate:
        if gate.fidelity and artifact.kind == "reference":
            continue  # the reference's own continuations: nothing to compare
        cells = []
        for measured in columns:
            result = measured.gate(artifact.id, gate.id)  # a seeded gate's value: the mean over its seeds
            value = None if result is None else result.value
            cells.append(_MISSING if value is None else f"{value:.3f}")
        if any(c != _MISSING for c in cells):
            rows.append({"gate": gate.id, "metric": gate.metric, "cells": cells})
    return rows


def _speed_rows(artifact: Artifact, columns: list[FamilyMeasurements]) -> list[Context]:
    keys = sorted(
        {
            (p.artifact_id, p.workload.id, p.speculative, p.concurrency)
            for measured in columns
            for p in _points(measured, artifact)
        },
        key=lambda k: (k[0], k[1], k[2] != NONE, k[2], k[3]),
    )
    rows = []
    for served, workload, config, concurrency in keys:
        cells = []
        for measured in columns:
            point = measured.speed.get((served, workload, config, concurrency))
            cells.append(_MISSING if point is None else _speed_cell(point))
        label = f"{workload}, {config}" + (f", {concurrency} in flight" if concurrency > 1 else "")
        if artifact.kind == "draft":
            label += f", on {served}"
        rows.append({"point": label, "cells": cells})
    return rows


def _speed_cell(point: SpeedPoint) -> Markdown:
    text = f"{point.throughput:.1f}"
    acceptance = point.metrics.get("spec_acceptance_rate")
    if point.speculative != NONE and acceptance is not None:
        text += f" (acceptance {acceptance:.2f})"
    return Markdown(text)
