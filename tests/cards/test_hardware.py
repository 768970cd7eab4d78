"""A card shows each hardware's ledger side by side (issue 30): the family's `results/` and another machine's
`results-<name>/` beside it, each selected on its own, every gate value and speed point per hardware."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from hfrelease.cards import CardInputs, entry_for, read_inputs, render_family
from hfrelease.cards.inputs import HardwareLedger
from hfrelease.cards.measurements import measure_family
from hfrelease.ledger.record import Metric
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from tests.cards.synthetic import gate_record
from tests.conftest import FIXTURES

H200 = {
    "cpu": "Intel(R) Xeon(R) Processor",
    "cpu_count": 16,
    "gpu_count": 1,
    "gpus": [{"name": "NVIDIA H200", "driver": "580.159.04"}],
}


def _on_h200(inputs: CardInputs, *, speed_factor: float) -> HardwareLedger:
    """The same ledger as measured on an H200 with another vLLM: speed points `speed_factor` times faster."""
    entries = []
    for entry in inputs.records:
        record = entry.record
        metrics = dict(record.metrics)
        if record.kind == "speed":
            throughput = metrics["output_throughput"]
            metrics["output_throughput"] = Metric(value=throughput.value * speed_factor, stderr=throughput.stderr)
        record = record.model_copy(
            update={
                "hardware": H200,
                "metrics": metrics,
                "versions": {**record.versions, "vllm": "0.26.0", "torch": "2.11.0"},
            }
        )
        entries.append(dataclasses.replace(entry, record=record))
    return HardwareLedger(name="results-h200", entries=tuple(entries))


def _section(readme: str) -> str:
    start = readme.index("## Measured on each hardware")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end >= 0 else None]


def test_a_card_shows_both_hardwares_gates_and_speed(nanbeige: CardInputs) -> None:
    """fp8-dynamic's card: one row per ledger naming its hardware and vLLM, each gate's value under each
    hardware, each speed point's tok/s under each, read from that ledger's records."""
    inputs = dataclasses.replace(nanbeige, hardwares=(_on_h200(nanbeige, speed_factor=3.0),))
    section = _section(render_family(inputs, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic").readme)
    assert "| `results/` | 1x NVIDIA GeForce RTX 5090 | vllm 0.25.1 |" in section
    assert "| `results-h200/` | 1x NVIDIA H200 | vllm 0.26.0, torch 2.11.0 |" in section
    assert "| Gate (metric) | NVIDIA GeForce RTX 5090 | NVIDIA H200 |" in section
    point = next(
        p
        for p in measure_family(nanbeige).points(artifact_id="fp8-dynamic")
        if p.speculative == "none" and p.concurrency == 1
    )
    row = f"| {point.workload.id}, none | {point.throughput:.1f} | {point.throughput * 3:.1f} |"
    assert row in section
    gate = nanbeige.manifest.gate[0]
    assert f"| {gate.id} (" in section


def test_no_section_without_another_hardware(nanbeige: CardInputs) -> None:
    """One ledger: the card is what it was (the goldens hold that too)."""
    readme = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic").readme
    assert "## Measured on each hardware" not in readme


def test_render_reads_results_dash_name_beside_the_ledger(tmp_path: Path) -> None:
    """`read_inputs` reads `results-h200/` beside `results/` as another hardware's ledger, not into the card's own
    records; a merged ledger given elsewhere has none."""
    family = tmp_path / "family"
    shutil.copytree(FIXTURES / "family", family)
    manifest = load_manifest(family)
    assert read_inputs(manifest).hardwares == ()
    record = gate_record(
        manifest, manifest.reference.id, manifest.gate[0], accuracy=0.9, agreement=1.0, step=1, size=1000
    )
    Ledger(family / "results-h200").write(record.model_copy(update={"hardware": H200}))
    inputs = read_inputs(manifest)
    assert [(h.name, [e.record.hardware for e in h.entries]) for h in inputs.hardwares] == [("results-h200", [H200])]
    assert all(e.record.hardware != H200 for e in inputs.records)
    assert read_inputs(manifest, ledger_root=tmp_path / "merged").hardwares == ()
    assert entry_for(record).name  # the planted record is a real ledger record
