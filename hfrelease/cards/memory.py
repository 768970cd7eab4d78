"""Serving memory per artifact, for "Which artifact should I choose?": from the records' `extra.memory`.

`hfrelease eval` keeps, in every record it measures on a server it started, what vLLM's start-up log
said (weights as loaded, KV cache reserved and how many tokens it holds, the context length) and the
peak PSS of the server's processes so far (`hfrelease.serving.memory`). A card shows two figures:

- **memory to serve**: the weights plus the KV cache of one request at the full context length the
  server was started with, which is what decides whether an artifact fits a machine (the seeds' "fits in
  ~7 GB at FP8" rule). Weights are vLLM's own figure on a GPU; the CPU path does not log it, and there the
  weight files' size is used (weights are loaded as stored).
- **peak RAM**: the measured high-water mark of host memory of every server process together, runtime
  included, on the recorded hardware (on a GPU the weights and KV cache are in device memory, which
  the first figure accounts for; a per-process VRAM reading is not taken).

The gate records of the artifact's newest server run are used (served exactly as the card's serving
command); the record with the highest peak counts, since the peak only grows while a server runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hfrelease.cards.inputs import RecordEntry

GIB = 1024**3


@dataclass(frozen=True, kw_only=True)
class MemoryFigures:
    artifact_id: str
    entry: RecordEntry  # the record the figures are read from
    serve_bytes: float | None  # weights + one full-context request's KV cache
    weights_from_files: bool  # True when the weights term is the files' size, not vLLM's loaded figure
    max_model_len: int | None
    kv_device: str | None
    peak_bytes: int | None


def _number(data: Mapping[str, object], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def figures(entries: Iterable[RecordEntry], *, weight_bytes: int | None) -> MemoryFigures | None:
    """The memory figures of one artifact from its records (gate records preferred), or None."""
    best: tuple[int, float, RecordEntry, Mapping[str, object]] | None = None
    for entry in entries:
        record = entry.record
        found = record.extra.get("memory")
        if not isinstance(found, dict) or not found:
            continue
        memory: Mapping[str, object] = found
        if record.kind == "speed" and record.extra.get("speculative") != "none":
            continue  # a draft model shares the server's memory: not this artifact's own figure
        rank = 1 if record.kind == "gate" else 0
        peak = _number(memory, "peak_pss_bytes") or 0.0
        if best is None or (rank, peak) > (best[0], best[1]):
            best = (rank, peak, entry, memory)
    if best is None:
        return None
    _, _, entry, memory = best
    weights = _number(memory, "weights_gib")
    weights_bytes = weights * GIB if weights is not None else (float(weight_bytes) if weight_bytes else None)
    kv_gib, tokens, length = (_number(memory, k) for k in ("kv_cache_gib", "kv_cache_tokens", "max_model_len"))
    serve = None
    if weights_bytes is not None and kv_gib is not None and tokens and length:
        serve = weights_bytes + length * kv_gib * GIB / tokens
    peak_value = _number(memory, "peak_pss_bytes")
    device = memory.get("kv_device")
    return MemoryFigures(
        artifact_id=entry.record.artifact_id, entry=entry, serve_bytes=serve,
        weights_from_files=weights is None, max_model_len=int(length) if length else None,
        kv_device=device if isinstance(device, str) else None,
        peak_bytes=int(peak_value) if peak_value is not None else None,
    )
