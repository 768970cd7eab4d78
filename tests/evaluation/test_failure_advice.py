"""A failing gate's line says where it was measured (the ISA path) and what a maintainer can do about it."""

from __future__ import annotations

import pytest

from hfrelease.evaluation.judging import GateRow, failure_advice, served_on
from hfrelease.stages.view import Block
from hfrelease.verdicts.comparison import paired_comparison

pytestmark = pytest.mark.unit


def _row(check: str, *, artifact: list[float], served: str | None = "AVX2, vLLM _C_AVX2 kernels") -> GateRow:
    docs = [str(i) for i in range(len(artifact))]
    comparison = paired_comparison(dict(zip(docs, artifact, strict=True)), dict.fromkeys(docs, 0.0), margin=0.02,
                                   higher_is_better=False)
    return GateRow(artifact_id="w8a8-int8", gate_id="fidelity", label="Fidelity to the reference",
                   origin="measured", status="ok", value=comparison.artifact_mean, stderr=None, n=len(docs),
                   truncated=0, empty=0, mode="non-thinking", verdict=comparison.verdict, reason=comparison.reason,
                   comparison=comparison, checks=((check, comparison),), served_on=served)


def test_a_failing_fidelity_gate_names_its_path_and_the_remedies() -> None:
    row = _row("kl", artifact=[0.0, 0.001, 0.09, 0.002, 0.0, 0.05])
    assert row.verdict == "fail"
    advice = failure_advice(row)
    assert advice is not None
    assert advice.startswith("w8a8-int8 fails Fidelity to the reference on AVX2, vLLM _C_AVX2 kernels: ")
    assert "more prompts" in advice and "every path" in advice and "re-quantize" in advice


def test_a_passing_gate_has_no_advice_and_an_unknown_path_is_not_invented() -> None:
    assert failure_advice(_row("kl", artifact=[0.0] * 6)) is None
    advice = failure_advice(_row("accuracy", artifact=[0.0, 0.3, 0.3, 0.3], served=None))
    assert advice is not None and " on " not in advice.split(":")[0] and "more items" in advice


@pytest.mark.parametrize(("hardware", "expected"), [
    ({"cpu": "AMD EPYC", "cpu_isa": "avx2", "vllm_kernels": ["_C_AVX2"]}, "AVX2, vLLM _C_AVX2 kernels"),
    ({"cpu_isa": "avx512_bf16", "vllm_kernels": ["_C"]}, "AVX-512 with BF16, vLLM _C kernels"),
    ({"cpu_isa": "avx2"}, "AVX2"),
    ({"cpu": "Xeon", "gpus": [{"name": "NVIDIA H200", "driver": "580"}] * 2}, "NVIDIA H200"),
    ({"cpu": "an old record, before the ISA was recorded"}, None),
])
def test_served_on_reads_the_records_hardware(hardware: dict[str, object], expected: str | None) -> None:
    assert served_on(hardware) == expected


def test_the_gate_table_prints_the_advice_under_the_table() -> None:
    """The eval view (what eval, the release's eval jobs and scripts/demo print) carries the line."""
    from types import SimpleNamespace

    from hfrelease.stages.eval_view import gates_view

    row = _row("kl", artifact=[0.0, 0.001, 0.09, 0.002, 0.0, 0.05])
    report = SimpleNamespace(rows=[row], loads=[], servers_started=1, requests_sent=6, run_dir="run")
    blocks: list[Block] = gates_view(report)  # type: ignore[arg-type]
    assert any("fails Fidelity to the reference on AVX2" in str(block) for block in blocks)
