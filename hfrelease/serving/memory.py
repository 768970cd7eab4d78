"""How much memory a vLLM server took: what its start-up log says it allocated, and what it really held.

Two sources, recorded together so a card can say both what serving *needs* and what it *took*:

- **vLLM's start-up log**, which states the weights as loaded (`Model loading took X GiB`, GPU), the
  checkpoint size (`Checkpoint size: X GiB`, CPU), the KV cache it reserved (`Available KV cache memory:
  X GiB` on a GPU, `Explicitly set (X/Y) GiB for KV cache` on CPU) and how many tokens that holds
  (`<device> KV cache size: N tokens, Maximum concurrency for L tokens per request`), with the context
  length L. From these, the memory to serve one request of the full context is weights + L * (KV bytes
  per token).
- **The server's processes**, sampled while it serves: the peak of the summed proportional set size
  (PSS) of the whole process group. PSS, not RSS: vLLM's API server and engine share memory, and RSS
  would count those pages once per process.

The log lines are vLLM's own wording (checked against vLLM 0.32's sources); a vLLM that words them
differently leaves those fields `None`, never a wrong number.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3

_WEIGHTS = re.compile(r"Model loading took ([0-9.]+) ?GiB")
_CHECKPOINT = re.compile(r"Checkpoint size: ([0-9.]+) ?GiB")
_KV_GPU = re.compile(r"Available KV cache memory: ([0-9.]+) ?GiB")
_KV_CPU = re.compile(r"Explicitly set \(([0-9.]+)/[0-9.]+\) ?GiB for KV cache")
_KV_TOKENS = re.compile(r"\] ([^\]\n]+?) KV cache size: ([0-9,]+) tokens"
                        r"(?:, Maximum concurrency for ([0-9,]+) tokens per request)?")
_MAX_LEN = re.compile(r"\bmax_seq_len=(\d+)")


@dataclass(frozen=True, kw_only=True)
class StartupMemory:
    """What a vLLM start-up log states about memory; a field the log does not state is None."""

    weights_gib: float | None = None  # weights as loaded on the device (GPU only)
    checkpoint_gib: float | None = None  # size of the checkpoint read (CPU path logs it, 2 decimals)
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    kv_device: str | None = None  # "GPU", "CPU", ... as vLLM names it
    max_model_len: int | None = None

    @property
    def kv_bytes_per_token(self) -> float | None:
        if self.kv_cache_gib is None or not self.kv_cache_tokens:
            return None
        return self.kv_cache_gib * GIB / self.kv_cache_tokens


def parse_startup_log(text: str) -> StartupMemory:
    """The memory figures of a vLLM start-up log (the last of each, should the log hold two starts)."""

    def last(pattern: re.Pattern[str]) -> re.Match[str] | None:
        matches = list(pattern.finditer(text))
        return matches[-1] if matches else None

    weights, checkpoint = last(_WEIGHTS), last(_CHECKPOINT)
    kv = last(_KV_GPU) or last(_KV_CPU)
    tokens, max_len = last(_KV_TOKENS), last(_MAX_LEN)
    # The KV line names the length it sized the cache for; the engine-config line is the fallback.
    length = tokens.group(3) if tokens and tokens.group(3) else (max_len.group(1) if max_len else None)
    return StartupMemory(
        weights_gib=float(weights.group(1)) if weights else None,
        checkpoint_gib=float(checkpoint.group(1)) if checkpoint else None,
        kv_cache_gib=float(kv.group(1)) if kv else None,
        kv_cache_tokens=int(tokens.group(2).replace(",", "")) if tokens else None,
        kv_device=tokens.group(1) if tokens else None,
        max_model_len=int(length.replace(",", "")) if length else None,
    )


def group_pss(pid: int) -> int | None:
    """Summed PSS in bytes of `pid` and all its descendants; None when it cannot be read (not Linux,
    no permission, the process is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except (psutil.Error, OSError):
        return None
    total = 0
    seen = False
    for process in processes:
        try:
            info = process.memory_full_info()
        except (psutil.Error, OSError):
            continue  # a worker that just exited holds nothing any more
        pss = getattr(info, "pss", None)
        if pss is None:
            return None  # not Linux: there is no PSS, and RSS would double-count shared pages
        total += int(pss)
        seen = True
    return total if seen else None


class PeakMemory:
    """The largest `group_pss` seen across `sample()` calls (called from the server's watchdog)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.peak_bytes: int | None = None
        self.samples = 0

    def sample(self, pid: int) -> None:
        value = group_pss(pid)
        if value is None:
            return
        with self._lock:
            self.samples += 1
            if self.peak_bytes is None or value > self.peak_bytes:
                self.peak_bytes = value


def memory_record(log_path: Path, peak: PeakMemory | None) -> dict[str, Any]:
    """What a ledger record keeps under `extra["memory"]`: the log's figures and the measured peak.

    JSON types only; a figure that is unknown is left out rather than written as null, so a card can
    tell "not measured" from a value.
    """
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        text = ""
    startup = parse_startup_log(text)
    data: dict[str, Any] = {
        "weights_gib": startup.weights_gib,
        "checkpoint_gib": startup.checkpoint_gib,
        "kv_cache_gib": startup.kv_cache_gib,
        "kv_cache_tokens": startup.kv_cache_tokens,
        "kv_device": startup.kv_device,
        "max_model_len": startup.max_model_len,
    }
    if peak is not None and peak.peak_bytes is not None:
        data["peak_pss_bytes"] = peak.peak_bytes
        data["pss_samples"] = peak.samples
    return {k: v for k, v in data.items() if v is not None}
