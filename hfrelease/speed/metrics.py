"""Speculative-decoding counters from a vLLM server's Prometheus `/metrics`, and what their deltas mean.

vLLM counts, per engine and served model (labels `engine`, `model_name`):

    vllm:spec_decode_num_drafts_total                       verification steps that carried a draft
    vllm:spec_decode_num_draft_tokens_total                 tokens proposed
    vllm:spec_decode_num_accepted_tokens_total              tokens accepted
    vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}

A snapshot sums the engines (data-parallel servers have several) of one served model. A workload run
is bracketed by two snapshots; from the delta:

    acceptance rate          = accepted / draft_tokens
    mean acceptance length   = 1 + accepted / drafts       (tokens emitted per verification step)
    acceptance at position i = accepted_at[i] / drafts     (unconditional)
    conditional at i         = accepted_at[i] / accepted_at[i-1]   (given position i-1 was accepted;
                               position 0 is conditioned on the draft existing, i.e. / drafts)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_NAMES = (DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS)


@dataclass(frozen=True, kw_only=True)
class SpecCounters:
    """Speculative-decoding counter values (a snapshot, or the delta between two)."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: Mapping[int, int] = field(default_factory=dict)
    present: bool = False  # the server exposes the counters at all (it speculates)

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        positions = set(self.accepted_per_pos) | set(before.accepted_per_pos)
        return SpecCounters(
            drafts=self.drafts - before.drafts,
            draft_tokens=self.draft_tokens - before.draft_tokens,
            accepted=self.accepted - before.accepted,
            accepted_per_pos={p: self.accepted_per_pos.get(p, 0) - before.accepted_per_pos.get(p, 0)
                              for p in sorted(positions)},
            present=self.present and before.present,
        )

    def __add__(self, other: SpecCounters) -> SpecCounters:
        positions = set(self.accepted_per_pos) | set(other.accepted_per_pos)
        return SpecCounters(
            drafts=self.drafts + other.drafts,
            draft_tokens=self.draft_tokens + other.draft_tokens,
            accepted=self.accepted + other.accepted,
            accepted_per_pos={p: self.accepted_per_pos.get(p, 0) + other.accepted_per_pos.get(p, 0)
                              for p in sorted(positions)},
            present=self.present or other.present,
        )


def parse_counters(text: str, *, model_name: str | None = None) -> SpecCounters:
    """The speculative-decoding counters in Prometheus exposition `text`, summed over engines.

    Only samples whose `model_name` label equals `model_name` count (when both are given), so a server
    serving several models is not mixed up; samples without the label count regardless.
    """
    from prometheus_client.parser import text_string_to_metric_families

    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    per_pos: dict[int, float] = {}
    present = False
    # The parser chokes on nothing vLLM writes, but /metrics also carries histograms of every other
    # subsystem: only the four counters are looked at.
    relevant = "\n".join(line for line in text.splitlines() if "spec_decode" in line) + "\n"
    for family in text_string_to_metric_families(relevant):
        for sample in family.samples:
            if sample.name not in _NAMES:
                continue  # *_created timestamps
            labels = sample.labels
            if model_name is not None and "model_name" in labels and labels["model_name"] != model_name:
                continue
            present = True
            if sample.name == ACCEPTED_PER_POS:
                position = int(labels["position"])
                per_pos[position] = per_pos.get(position, 0.0) + sample.value
            else:
                totals[sample.name] += sample.value
    return SpecCounters(
        drafts=round(totals[DRAFTS]), draft_tokens=round(totals[DRAFT_TOKENS]), accepted=round(totals[ACCEPTED]),
        accepted_per_pos={p: round(v) for p, v in sorted(per_pos.items())}, present=present,
    )


def relevant_lines(text: str) -> str:
    """The speculative-decoding lines of a /metrics page: what a raw snapshot file keeps."""
    return "".join(line + "\n" for line in text.splitlines() if "spec_decode" in line)


def scrape(base_url: str, *, timeout: float = 10.0) -> str:
    """The server's /metrics page as text."""
    import urllib.request

    with urllib.request.urlopen(f"{base_url.rstrip('/')}/metrics", timeout=timeout) as response:  # noqa: S310
        return str(response.read().decode("utf-8"))


def acceptance_metrics(delta: SpecCounters) -> dict[str, float]:
    """Ledger metrics (`spec_*`) for a counter delta; empty when nothing was drafted."""
    if not delta.present or delta.drafts <= 0:
        return {}
    metrics: dict[str, float] = {
        "spec_drafts": float(delta.drafts),
        "spec_draft_tokens": float(delta.draft_tokens),
        "spec_accepted_tokens": float(delta.accepted),
        "spec_acceptance_rate": delta.accepted / delta.draft_tokens if delta.draft_tokens else 0.0,
        "spec_mean_acceptance_length": 1.0 + delta.accepted / delta.drafts,
    }
    previous = float(delta.drafts)
    for position in sorted(delta.accepted_per_pos):
        accepted = float(delta.accepted_per_pos[position])
        metrics[f"spec_acceptance_pos_{position}"] = accepted / delta.drafts
        # Once no draft survives to position i-1, position i is never reached: report 0, not a 0/0.
        metrics[f"spec_conditional_acceptance_pos_{position}"] = accepted / previous if previous else 0.0
        previous = accepted
    return metrics
