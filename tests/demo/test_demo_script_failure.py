"""scripts/demo fails loudly and usefully: on a non-zero exit it names the step, the host's CPU and ISA, what
the exit code means and the failing gates' lines, and says the working copy is started afresh next time.

The test runs the script's own failure handler (the lines from `CURRENT_STEP=` to `trap on_exit EXIT`,
read from scripts/demo) in a bash that fails the way a release job does; the whole demo takes half an hour.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from hfrelease.ledger.provenance import host_isa

ROOT = Path(__file__).resolve().parents[2]


def _handler() -> str:
    text = (ROOT / "scripts" / "demo").read_text()
    found = re.search(r"^CURRENT_STEP=.*?^trap on_exit EXIT$", text, re.S | re.M)
    assert found, "scripts/demo has no failure handler"
    return found.group(0)


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    script = (f"set -euo pipefail\nROOT={tmp_path}\nWORK=$ROOT/build/demo-release\n{_handler()}\n{body}\n")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_failed_gate_is_summed_up_with_the_host(tmp_path: Path) -> None:
    failing = "w8a8-int8 fails Fidelity to the reference on AVX2, vLLM _C_AVX2 kernels: score more prompts"
    result = _run(tmp_path, f'step "the release workflow"\necho "reference passes"\necho "{failing}"\nexit 4')
    assert result.returncode == 4
    # The demo tees stdout and stderr together into build/demo.log; the summary is what follows its banner.
    summary = result.stdout.partition("scripts/demo stopped:")[2]
    assert summary.startswith(' exit code 4 during "the release workflow"'), result.stdout
    assert f"vector ISA {host_isa()}" in summary
    assert "a gate failed for an artifact meant to be published" in summary
    assert f"  {failing}" in summary and "reference passes" not in summary
    assert "starts it afresh" in summary
    assert failing in (tmp_path / "build" / "demo.log").read_text()  # the whole output is kept


def test_a_successful_run_prints_no_summary(tmp_path: Path) -> None:
    result = _run(tmp_path, 'step "done"\necho fine')
    assert result.returncode == 0 and "stopped" not in result.stdout
