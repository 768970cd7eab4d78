"""The demo family's NVFP4 quant, built by `hfrelease.demo.nvfp4` (`hfrelease demo build`), checked for real.

`check` compares the declared scheme with the checkpoint llm-compressor wrote, and refuses NVFP4A16 for it (exit
3). No server starts here: the quant is served through the emulation route (`hfrelease.serving.emulation`) and
gated with the whole family in tests/evaluation/test_eval_family.py, which also checks what its records say of
the route.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hfrelease.demo.nvfp4 import NVFP4
from tests.demo_session import BUILD, marked_env

pytestmark = [pytest.mark.slow]


def test_the_nvfp4_quant_is_checked_against_its_checkpoint(demo_family: Path, tmp_path: Path) -> None:
    config = json.loads((BUILD / NVFP4 / "config.json").read_text())
    assert config["quantization_config"]["format"] == "nvfp4-pack-quantized"
    env = marked_env(tmp_path)

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hfrelease", "check", "--offline", "--json", str(demo_family)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)

    checked = check()
    assert not [p for p in json.loads(checked.stdout).get("problems", []) if "quantization.scheme" in p["location"]]
    text = (demo_family / "release.toml").read_text()
    assert text.count('scheme = "NVFP4"') == 1
    (demo_family / "release.toml").write_text(text.replace('scheme = "NVFP4"', 'scheme = "NVFP4A16"'))
    refused = check()
    assert refused.returncode == 3, refused.stderr[-2000:]
    scheme = [p for p in json.loads(refused.stdout)["problems"] if p["location"].endswith("quantization.scheme")]
    assert len(scheme) == 1 and scheme[0]["suggestion"] == "NVFP4"
