"""Fidelity figures: how closely an artifact's next-token distributions follow the reference's.

What is measured, per prompt of the gate's prompt set:

1. The reference generates its greedy continuation of the prompt once (`max_tokens` tokens at temperature 0).
2. The reference and the artifact each *score* the same token sequence (prompt + that continuation) through
   vLLM's OpenAI API: `/v1/completions` with the token ids as the prompt, `prompt_logprobs = top_k` and
   `max_tokens = 1` returns, for every position, the logprobs of the `top_k` most likely next tokens and of
   the token actually there. Only the continuation's positions are scored (the prompt is the same text for
   both and says little about the artifact's own behaviour).
3. Per position: the KL divergence KL(reference || artifact), whether the top-1 token differs (a flip), and
   per prompt the first continuation position where it does.

**The KL approximation.** vLLM returns `top_k` logprobs, not the whole distribution. The support both
sides report (each side's top-k and the scored token: the tokens with a logprob from both) is kept as it
is, and everything else is merged into one "rest" bucket holding the remaining probability mass of each
side (1 - the reported mass). KL over that coarser partition is a **lower bound** of the true KL (merging
outcomes never increases a KL divergence: the data-processing inequality), exact when the reported
tokens carry all the mass, and it does not hide a disagreement about which tokens are likely: mass one
side puts outside the shared support lands in the rest bucket. A per-position value below 0 can only be
rounding of the reported logprobs and is counted as 0; a rest mass of 0 or less on the artifact's side is
taken as `REST_FLOOR`.

Per prompt, the sample's score is its mean per-position KL; `flip_rate` and `first_divergence` (None when
the top-1 token never differs) are kept beside it. Everything here is a pure function of the raw responses
that the ledger keeps beside the record, so the figures can be recomputed from them (the tests do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REST_FLOOR = 1e-10  # the smallest "rest" mass on the artifact's side: a finite bound instead of infinity


@dataclass(frozen=True, kw_only=True)
class PositionLogprobs:
    """What one scoring response says about one position: token id -> (logprob, rank)."""

    entries: Mapping[int, tuple[float, int | None]]

    @property
    def top1(self) -> int:
        """The most likely token: rank 1 when vLLM ranked it, else the highest logprob (ties: lowest id)."""
        ranked = [t for t, (_, rank) in self.entries.items() if rank == 1]
        if ranked:
            return min(ranked)
        return min(self.entries, key=lambda t: (-self.entries[t][0], t))


@dataclass(frozen=True, kw_only=True)
class PromptFidelity:
    """The fidelity figures of one prompt."""

    doc_id: str
    kl: float  # mean per-position KL(reference || artifact), nats
    flip_rate: float  # share of positions whose top-1 token differs
    first_divergence: int | None  # first continuation position (0-based) with a flip, None if none
    positions: int

    def sample(self) -> dict[str, Any]:
        """The ledger sample of this prompt (score = its mean KL)."""
        return {"doc_id": self.doc_id, "score": self.kl, "truncated": False, "empty": False,
                "flip_rate": self.flip_rate, "first_divergence": self.first_divergence, "positions": self.positions}


def parse_prompt_logprobs(response: Mapping[str, Any]) -> list[PositionLogprobs | None]:
    """The `prompt_logprobs` of a `/v1/completions` response's first choice, one entry per prompt token.

    vLLM returns, per position, a JSON object keyed by token id (as a string) with `logprob` and `rank`;
    the first position has none (None). A -inf logprob arrives as -9999.0 (vLLM clamps it).
    """
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ValueError("the response has no choices")
    raw = choices[0].get("prompt_logprobs")
    if not isinstance(raw, list):
        raise ValueError("the response has no prompt_logprobs (was prompt_logprobs set on the request?)")
    positions: list[PositionLogprobs | None] = []
    for item in raw:
        if item is None:
            positions.append(None)
            continue
        if not isinstance(item, Mapping) or not item:
            raise ValueError("a prompt_logprobs entry is not an object of token ids")
        entries: dict[int, tuple[float, int | None]] = {}
        for token, value in item.items():
            if not isinstance(value, Mapping) or not isinstance(value.get("logprob"), int | float):
                raise ValueError(f"prompt_logprobs entry for token {token!r} has no logprob")
            rank = value.get("rank")
            entries[int(token)] = (float(value["logprob"]), rank if isinstance(rank, int) else None)
        positions.append(PositionLogprobs(entries=entries))
    return positions


def position_kl(reference: PositionLogprobs, artifact: PositionLogprobs) -> float:
    """KL(reference || artifact) on the shared reported support plus one "rest" bucket (module docstring)."""
    # Sorted: a set's order depends on how it was built (the response's key order), and the sum's rounding
    # on the order, so figures recomputed from the raw file must add the terms in the same order.
    shared = sorted(reference.entries.keys() & artifact.entries.keys())
    kl = 0.0
    p_mass = q_mass = 0.0
    for token in shared:
        lp, lq = reference.entries[token][0], artifact.entries[token][0]
        p = math.exp(lp)
        p_mass += p
        q_mass += math.exp(lq)
        kl += p * (lp - lq)
    p_rest = 1.0 - p_mass
    if p_rest > 0:
        kl += p_rest * (math.log(p_rest) - math.log(max(1.0 - q_mass, REST_FLOOR)))
    return max(kl, 0.0)


def prompt_fidelity(
    doc_id: str,
    reference: Sequence[PositionLogprobs | None],
    artifact: Sequence[PositionLogprobs | None],
    *,
    start: int,
) -> PromptFidelity:
    """The figures of one prompt from both sides' scoring of the same sequence; positions `start` onwards
    (the continuation) are scored."""
    if len(reference) != len(artifact):
        raise ValueError(f"prompt {doc_id!r}: the reference scored {len(reference)} positions, "
                         f"the artifact {len(artifact)}: not the same token sequence")
    kls: list[float] = []
    flips: list[bool] = []
    for ref, art in zip(reference[start:], artifact[start:], strict=True):
        if ref is None or art is None:
            raise ValueError(f"prompt {doc_id!r}: a continuation position has no logprobs")
        kls.append(position_kl(ref, art))
        flips.append(ref.top1 != art.top1)
    if not kls:
        raise ValueError(f"prompt {doc_id!r}: the continuation is empty, nothing to score")
    first = next((i for i, flip in enumerate(flips) if flip), None)
    return PromptFidelity(doc_id=doc_id, kl=sum(kls) / len(kls), flip_rate=sum(flips) / len(flips),
                          first_divergence=first, positions=len(kls))


def figures_from_raw(lines: Sequence[Mapping[str, Any]]) -> list[PromptFidelity]:
    """Every prompt's figures from the raw responses an artifact's fidelity record keeps (`raw_line`)."""
    found = []
    for line in lines:
        start = len(line["prompt_token_ids"])
        found.append(prompt_fidelity(str(line["id"]), parse_prompt_logprobs(line["reference"]),
                                     parse_prompt_logprobs(line["artifact"]), start=start))
    return found


def summarize(figures: Sequence[PromptFidelity]) -> dict[str, float]:
    """The record's metrics: mean over prompts of each figure (first divergence over prompts that diverge)."""
    n = len(figures)
    diverged = [f.first_divergence for f in figures if f.first_divergence is not None]
    out = {"kl": sum(f.kl for f in figures) / n, "flip_rate": sum(f.flip_rate for f in figures) / n,
           "diverged": len(diverged) / n}
    if diverged:
        out["first_divergence"] = sum(diverged) / len(diverged)
    return out
