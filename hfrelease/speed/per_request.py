"""Each prompt of a batch-1 speed point sent once more, alone: its output tokens and its own acceptance.

`vllm bench serve` keeps no per-request data that hfrelease can use: its streamed responses carry the
server's per-request speculative metrics (vLLM's `--per-request-spec-decode-metrics`, the response's
`metrics.speculative_decoding`) and, with `return_token_ids`, the output tokens, but its request function
reads only the text and the usage and drops the rest. So after a point's measured repeats, hfrelease sends
each of the point's prompts once itself, one at a time, with exactly the benchmark's payload (the
workload's messages, token budget, sampling, chat-template arguments) plus `return_token_ids`, and keeps
what the server answers: each request's output token ids and, on a speculating server started with
`--per-request-spec-decode-metrics detailed`, its per-verify-step accepted and drafted counts. One at a
time, because at batch 1 a greedy request's tokens depend on nothing else the server is doing; the
point's pooled counters (its `/metrics` deltas) stay what its acceptance figures are computed from.

The file shipped beside the record (`*.requests.jsonl`, one line per prompt, in prompt order) is the raw
evidence; the record keeps a per-request summary (`extra["requests"]`) that must agree with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrelease.errors import MeasurementError
from hfrelease.speed.bench import BenchRequest

if TYPE_CHECKING:
    from hfrelease.ledger.record import LedgerRecord
    from hfrelease.ledger.store import Ledger


@dataclass(frozen=True, kw_only=True)
class RequestOutcome:
    """One prompt's answer: its output token ids and the verify steps of its speculation (none without)."""

    index: int
    output_ids: tuple[int, ...]
    accepted_steps: tuple[int, ...] = ()  # per verify step, draft tokens accepted
    drafted_steps: tuple[int, ...] = ()  # per verify step, draft tokens proposed
    spec: bool = False  # the server reported per-request speculative metrics

    @property
    def accepted(self) -> int:
        return sum(self.accepted_steps)

    @property
    def drafted(self) -> int:
        return sum(self.drafted_steps)

    def accepted_at(self, depth: int) -> list[int]:
        """Per draft position, how many of this request's verify steps accepted a token there."""
        return [sum(1 for a in self.accepted_steps if a > i) for i in range(depth)]

    def drafted_at(self, depth: int) -> list[int]:
        """Per draft position, how many verify steps proposed a token there."""
        return [sum(1 for d in self.drafted_steps if d > i) for i in range(depth)]

    def summary(self, depth: int) -> dict[str, Any]:
        """What the ledger record keeps of this request (`extra["requests"]`)."""
        digest = hashlib.sha256(json.dumps(list(self.output_ids)).encode()).hexdigest()[:16]
        found: dict[str, Any] = {"output_tokens": len(self.output_ids), "output_sha": digest}
        if self.spec:
            found |= {
                "steps": len(self.accepted_steps),
                "accepted": self.accepted,
                "drafted": self.drafted,
                "accepted_per_pos": self.accepted_at(depth),
                "drafted_per_pos": self.drafted_at(depth),
            }
        return found


@dataclass(frozen=True, kw_only=True)
class PerRequest:
    outcomes: tuple[RequestOutcome, ...] = field(default_factory=tuple)
    depth: int = 0  # num_speculative_tokens (0 without speculation)

    def to_jsonl(self) -> bytes:
        lines = []
        for o in self.outcomes:
            line: dict[str, Any] = {"index": o.index, "output_ids": list(o.output_ids)}
            if o.spec:
                line |= {"per_step_accepted": list(o.accepted_steps), "per_step_drafted": list(o.drafted_steps)}
            lines.append(json.dumps(line, separators=(",", ":")))
        return ("\n".join(lines) + "\n").encode()

    def summaries(self) -> list[dict[str, Any]]:
        return [o.summary(self.depth) for o in self.outcomes]


def parse_jsonl(data: bytes) -> tuple[RequestOutcome, ...]:
    """The outcomes of a `*.requests.jsonl` file; ValueError when a line is not one."""
    outcomes = []
    for number, line in enumerate(data.decode().splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        ids, acc, dra = item.get("output_ids"), item.get("per_step_accepted"), item.get("per_step_drafted")
        if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids) or (acc is None) != (dra is None):
            raise ValueError(f"line {number} is not a per-request outcome")
        outcomes.append(
            RequestOutcome(
                index=int(item.get("index", number - 1)),
                output_ids=tuple(ids),
                accepted_steps=tuple(int(a) for a in acc or ()),
                drafted_steps=tuple(int(d) for d in dra or ()),
                spec=acc is not None,
            )
        )
    return tuple(outcomes)


def payload(request: BenchRequest, prompt: str) -> dict[str, Any]:
    """The chat request `vllm bench serve --backend openai-chat` sends for `prompt`, not streamed, with the
    output token ids asked for (`return_token_ids`, a vLLM extension of the OpenAI API)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_completion_tokens": request.output_len,
        "temperature": request.temperature,
        "return_token_ids": True,
    }
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.ignore_eos:
        body["ignore_eos"] = True
    if not request.thinking:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    return body


def prompts_of(path: Path, count: int) -> list[str]:
    """The first `count` prompts of a custom-dataset JSONL file, in order (the benchmark runs them unshuffled)."""
    found = []
    for line in path.read_text().splitlines():
        if line.strip():
            found.append(str(json.loads(line)["prompt"]))
        if len(found) == count:
            break
    return found


def _outcome(index: int, answer: Mapping[str, Any]) -> RequestOutcome:
    try:
        choice = answer["choices"][0]
        ids = choice.get("token_ids")
        if ids is None:
            raise KeyError("choices[0].token_ids")
        spec = ((answer.get("metrics") or {}).get("speculative_decoding")) or None
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise MeasurementError(f"the server's answer to prompt {index} lacks {exc}") from None
    if spec is None:
        return RequestOutcome(index=index, output_ids=tuple(int(t) for t in ids))
    accepted, drafted = spec.get("per_step_accepted"), spec.get("per_step_drafted")
    if accepted is None or drafted is None:
        # A verify step never ran (a one-token answer): the summary level omits empty arrays.
        accepted = drafted = []
    return RequestOutcome(
        index=index,
        output_ids=tuple(int(t) for t in ids),
        spec=True,
        accepted_steps=tuple(int(a) for a in accepted),
        drafted_steps=tuple(int(d) for d in drafted),
    )


def send_each(request: BenchRequest, *, timeout: float, depth: int) -> PerRequest:
    """Send every prompt of `request` once, one at a time, and keep each answer's tokens and counters."""
    import urllib.error
    import urllib.request

    outcomes = []
    url = f"{request.base_url.rstrip('/')}/v1/chat/completions"
    for index, prompt in enumerate(prompts_of(request.prompts, request.num_prompts)):
        data = json.dumps(payload(request, prompt)).encode()
        call = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})  # noqa: S310
        try:
            with urllib.request.urlopen(call, timeout=timeout) as response:  # noqa: S310
                answer = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise MeasurementError(f"prompt {index} sent alone for its per-request figures failed: {exc}") from None
        outcomes.append(_outcome(index, answer))
    return PerRequest(outcomes=tuple(outcomes), depth=depth)


def check_summaries(outcomes: Sequence[RequestOutcome], summaries: object, depth: int) -> None:
    """Raise ValueError unless a record's `extra["requests"]` is exactly what its requests file says."""
    if summaries != [o.summary(depth) for o in outcomes]:
        raise ValueError("the per-request summary of the record does not match its requests file")


def load_outcomes(ledger: Ledger, record: LedgerRecord) -> tuple[RequestOutcome, ...] | None:
    """The per-request outcomes a speed record keeps (None when it keeps none), checked: the file named in
    `extra["requests_raw"]` must exist, match the sha256 in its name, and agree with `extra["requests"]`.
    Anything else is a `LedgerError` (exit 6): an edited or missing per-request file is refused, never judged."""
    from hfrelease.errors import LedgerError

    names = record.extra.get("requests_raw")
    if not names:
        if record.extra.get("requests") is not None:
            raise LedgerError(
                f"speed record {record.subject_id!r} of {record.artifact_id!r} has per-request figures "
                "but names no per-request file (extra.requests_raw)"
            )
        return None
    if not isinstance(names, list) or len(names) != 1 or not isinstance(names[0], str):
        raise LedgerError(
            f"speed record {record.subject_id!r} of {record.artifact_id!r}: extra.requests_raw must name one file"
        )
    data = ledger.raw_bytes(record, names[0])  # LedgerError when missing or edited
    depth = record.extra.get("spec_depth", 0)
    try:
        outcomes = parse_jsonl(data)
        check_summaries(outcomes, record.extra.get("requests"), depth if isinstance(depth, int) else 0)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{ledger.raw_path(record, names[0])}: {exc}") from None
    return outcomes
