"""The NVFP4 route on a CPU build of vLLM (hfrelease.serving.emulation): when it is taken, what the plugin
declares, and what a record learns from the server's log. The route itself is served for real by
tests/demo/test_nvfp4.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hfrelease.manifest import Artifact
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.emulation import (
    EMULATION_VARIABLE,
    PLUGIN_DIR,
    emulated_kernels,
    linear_kernels,
    uses_emulation,
    with_emulation,
)

pytestmark = pytest.mark.unit

# vLLM 0.32's own lines (vllm/model_executor/kernels/linear/__init__.py), as a CPU server logged them.
LOG = """(Worker pid=29168) INFO 12-02 12:41:37 [cpu_model_runner.py:68] Starting to load model /tmp/nvfp4...
(Worker pid=29168) INFO 12-02 12:41:37 [__init__.py:1240] Using EmulationNvFp4LinearKernel for NVFP4 GEMM
"""


def _quant(scheme: str) -> Artifact:
    return Artifact.model_validate({
        "id": "q", "kind": "quant", "repo": "org/q", "source": {"path": "q"},
        "quantization": {"scheme": scheme, "tool": "llmcompressor", "tool_version": "0.14.0.1",
                         "modifier": "QuantizationModifier", "targets": ["Linear"], "ignore": ["lm_head"]}})


def _command() -> ServeCommand:
    return ServeCommand(argv=("vllm", "serve", "q"), env={"VLLM_CPU_KVCACHE_SPACE": "1"}, served_model_name="org/q")


@pytest.mark.parametrize(("scheme", "cpu", "taken"), [
    ("NVFP4", True, True), ("nvfp4", True, True),
    ("NVFP4", False, False),  # a GPU build: the real kernels
    ("NVFP4A16", True, False),  # no route serves it (the module's docstring says why)
    ("FP8_DYNAMIC", True, False),
])
def test_the_route_is_taken_for_nvfp4_on_a_cpu_build_only(scheme: str, cpu: bool, taken: bool) -> None:
    """The variable joins the serve command's environment (so the record's serve field says so) exactly then
    (on a CPU without AMX, where FP8 takes no route of its own: tests/serving/test_fp8_route.py)."""
    command = with_emulation(_command(), _quant(scheme), cpu=cpu, flags=frozenset({"avx2", "avx512f"}))
    assert uses_emulation(command) is taken
    assert command.env == ({"VLLM_CPU_KVCACHE_SPACE": "1", EMULATION_VARIABLE: "1"} if taken
                           else {"VLLM_CPU_KVCACHE_SPACE": "1"})


def test_the_plugin_names_the_register_function() -> None:
    """The metadata-only package's `vllm.general_plugins` entry point is `register`, which exists."""
    project = tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())
    entry = project["project"]["entry-points"]["vllm.general_plugins"]["hfrelease_nvfp4_emulation"]
    module, _, name = entry.partition(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), name))


def test_the_kernel_vllm_chose_is_read_from_its_log(tmp_path: Path) -> None:
    """`emulated` names the layer types an emulation kernel served; a real kernel's line makes none."""
    assert linear_kernels(LOG) == {"NVFP4": "EmulationNvFp4LinearKernel"}
    log = tmp_path / "server.log"
    log.write_text(LOG)
    assert emulated_kernels(log) == {"linear_kernels": {"NVFP4": "EmulationNvFp4LinearKernel"},
                                     "emulated": ["NVFP4"]}
    log.write_text("INFO [__init__.py:1240] Using CutlassNvFp4LinearKernel for NVFP4 GEMM\n")
    assert emulated_kernels(log) == {"linear_kernels": {"NVFP4": "CutlassNvFp4LinearKernel"}}
    log.write_text("no quantized layers\n")
    assert emulated_kernels(log) == {}
    assert emulated_kernels(tmp_path / "missing.log") == {}
