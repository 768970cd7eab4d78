"""Custom gate reports: parsed into per-sample outcomes, malformed ones refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.custom_gate import custom_gate_argv, parse_report
from hfrelease.manifest.model import Gate

pytestmark = pytest.mark.unit

GATE = Gate(id="json", command=["python", "gates/json_rate.py"], mode="non-thinking", max_tokens=48,
            metric="json_valid_rate", margin=0.05, limit=10)


def test_report_parsed() -> None:
    """Metrics, stderr and samples come through; counts are derived from the samples."""
    report = {
        "metrics": {"json_valid_rate": 0.5, "other": 2},
        "stderr": {"json_valid_rate": 0.25},
        "samples": [{"id": 1, "score": 1, "response": "{}"},
                    {"id": 2, "scores": {"json_valid_rate": 0.0, "other": 1.0}, "truncated": True}],
    }
    run = parse_report(GATE, report)
    assert run.value == 0.5 and run.stderr == 0.25
    assert run.n == 2 and run.truncated == 1 and run.empty == 0
    assert [s["doc_id"] for s in run.samples] == ["1", "2"]
    assert run.metrics["other"]["value"] == 2.0


@pytest.mark.parametrize(
    "report",
    [
        [],
        {"metrics": {}},
        {"metrics": {"json_valid_rate": "high"}},
        {"metrics": {"json_valid_rate": float("nan")}},
        {"metrics": {"json_valid_rate": 1.0}, "samples": [{"id": 1}]},
        {"metrics": {"json_valid_rate": 1.0}, "samples": "all"},
    ],
)
def test_malformed_reports_are_void(report: Any) -> None:
    """A report without the gate's metric or with bad samples is a MeasurementError, never a score."""
    with pytest.raises(MeasurementError):
        parse_report(GATE, report)


def test_argv(tmp_path: Path) -> None:
    """The command gets the server's URL, model, output file and the gate's settings."""
    argv = custom_gate_argv(GATE, base_url="http://127.0.0.1:1", model="m/x", out=tmp_path / "r.json")
    assert argv[1] == "gates/json_rate.py"
    joined = " ".join(argv)
    for part in ("--base-url http://127.0.0.1:1", "--model m/x", f"--out {tmp_path / 'r.json'}", "--max-tokens 48",
                 "--mode non-thinking", "--limit 10"):
        assert part in joined


@pytest.mark.allow_subprocess
def test_entry_point_gate(tmp_path: Path) -> None:
    """A Python entry point beside the manifest is called (in a process of its own) with the server's URL and model;
    its report is parsed."""
    from hfrelease.evaluation.custom_gate import run_custom_gate

    (tmp_path / "my_gate_module.py").write_text(
        "def run(*, base_url, model, limit, max_tokens, seed, mode):\n"
        "    assert base_url == 'http://127.0.0.1:9' and model == 'm/x' and mode == 'thinking'\n"
        "    return {'metrics': {'rate': 0.5}, 'samples': [{'id': 'a', 'score': 1}, {'id': 'b', 'score': 0}]}\n"
    )
    gate = Gate(id="ep", entry_point="my_gate_module:run", mode="thinking", max_tokens=8, metric="rate", margin=0.1)
    run = run_custom_gate(gate, base_url="http://127.0.0.1:9", model="m/x", cwd=tmp_path)
    assert run.value == 0.5 and run.n == 2
    assert [s["score"] for s in run.samples] == [1.0, 0.0]
