"""Run a fidelity gate against a served artifact through vLLM's OpenAI `/v1/completions` API.

The reference's run generates each prompt's greedy continuation and scores it; an artifact's run scores
the token sequences of the reference's run (read from the raw file beside the reference's record), so
both sides score exactly the same tokens. The figures are computed by `hfrelease.evaluation.fidelity`
from the raw responses, which are kept beside the record (one JSON line per prompt) so anyone can
recompute them.

Requests (vLLM 0.32, `vllm/entrypoints/openai/completion/protocol.py`):

- continuation: `{"prompt": text, "max_tokens": N, "temperature": 0, "return_token_ids": true}`; the
  choice's `prompt_token_ids` and `token_ids` are the sequence to score.
- scoring: `{"prompt": [token ids], "max_tokens": 1, "temperature": 0, "prompt_logprobs": top_k}`; the
  choice's `prompt_logprobs` has one entry per prompt token (None for the first), each the top-k tokens
  and the token actually there. `max_tokens = 1`: the one generated token is not used (vLLM reads 0 as
  "echo the prompt without generating", which needs `echo`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.fidelity import figures_from_raw, parse_prompt_logprobs, summarize
from hfrelease.evaluation.gate_run import GateRun
from hfrelease.manifest.model import MAX_TOP_K, Gate

Post = Callable[[str, Mapping[str, Any]], dict[str, Any]]  # (url, JSON body) -> JSON response
Progress = Callable[[int, int], None]
REQUEST_TIMEOUT = 600.0  # seconds per request when the caller gives none (the runner passes the gate's)


def top_k(gate: Gate) -> int:
    return gate.top_k if gate.top_k is not None else MAX_TOP_K


def continuation_request(gate: Gate, *, model: str, prompt: str) -> dict[str, Any]:
    """The reference's greedy continuation of one prompt."""
    return {"model": model, "prompt": prompt, "max_tokens": gate.max_tokens, "temperature": 0.0,
            "seed": gate.seed, "return_token_ids": True}


def scoring_request(gate: Gate, *, model: str, token_ids: Sequence[int]) -> dict[str, Any]:
    """One side's top-k logprobs at every position of a token sequence."""
    return {"model": model, "prompt": list(token_ids), "max_tokens": 1, "temperature": 0.0,
            "prompt_logprobs": top_k(gate)}


def post_json(url: str, body: Mapping[str, Any], *, timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
    """POST `body` as JSON and return the JSON answer; a refused or failed request is a MeasurementError."""
    if not url.startswith(("http://", "https://")):
        raise MeasurementError(f"{url!r} is not an http(s) URL of a vLLM server")
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",  # noqa: S310 - checked above
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - checked above
            data = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode(errors="replace")
        raise MeasurementError(f"{url} answered {exc.code}: {detail}") from None
    except (OSError, ValueError) as exc:
        raise MeasurementError(f"{url}: {exc}") from exc
    if not isinstance(data, dict):
        raise MeasurementError(f"{url} answered with JSON that is not an object")
    return data


def _choice(response: Mapping[str, Any], key: str) -> Any:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MeasurementError("a completion response has no choices")
    return choices[0].get(key)


def reference_lines(
    gate: Gate, prompts: Sequence[tuple[str, str]], *, base_url: str, model: str, post: Post = post_json,
    on_progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """The reference's raw lines: each prompt's greedy continuation and the reference's scoring of it."""
    url = f"{base_url.rstrip('/')}/v1/completions"
    lines: list[dict[str, Any]] = []
    for done, (doc_id, prompt) in enumerate(prompts):
        generated = post(url, continuation_request(gate, model=model, prompt=prompt))
        prompt_ids, continuation = _choice(generated, "prompt_token_ids"), _choice(generated, "token_ids")
        if not _token_list(prompt_ids) or not _token_list(continuation):
            raise MeasurementError(f"prompt {doc_id!r}: the continuation response lacks prompt_token_ids/token_ids "
                                   "(vLLM returns them for return_token_ids = true)")
        scored = post(url, scoring_request(gate, model=model, token_ids=[*prompt_ids, *continuation]))
        lines.append({"id": doc_id, "prompt": prompt, "prompt_token_ids": prompt_ids,
                      "continuation_token_ids": continuation, "finish_reason": _choice(generated, "finish_reason"),
                      "reference": scored})
        if on_progress:
            on_progress(done + 1, len(prompts))
    return lines


def artifact_lines(
    gate: Gate, reference: Sequence[Mapping[str, Any]], *, base_url: str, model: str, post: Post = post_json,
    on_progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """An artifact's raw lines: the reference's lines with the artifact's scoring of the same tokens beside."""
    url = f"{base_url.rstrip('/')}/v1/completions"
    lines: list[dict[str, Any]] = []
    for done, line in enumerate(reference):
        tokens = [*line["prompt_token_ids"], *line["continuation_token_ids"]]
        scored = post(url, scoring_request(gate, model=model, token_ids=tokens))
        lines.append({**line, "artifact": scored})
        if on_progress:
            on_progress(done + 1, len(reference))
    return lines


def _token_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(t, int) for t in value)


def raw_bytes(lines: Sequence[Mapping[str, Any]]) -> bytes:
    """The raw file's bytes: one canonical JSON line per prompt."""
    return "".join(json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
                   for line in lines).encode()


def read_raw(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def fidelity_run(lines: Sequence[Mapping[str, Any]], *, requests: int) -> GateRun:
    """The GateRun of a fidelity gate from its raw lines: the reference's (scored against itself: every
    figure 0, which checks the lines parse) or an artifact's (which have an "artifact" scoring each)."""
    own = [line if "artifact" in line else {**line, "artifact": line["reference"]} for line in lines]
    try:
        for line in own:
            parse_prompt_logprobs(line["artifact"])
        figures = figures_from_raw(own)
    except (KeyError, ValueError, TypeError) as exc:
        raise MeasurementError(f"the fidelity responses cannot be scored: {exc}") from None
    metrics = summarize(figures)
    return GateRun(
        value=metrics["kl"], stderr=None, metrics={k: {"value": v, "stderr": None} for k, v in metrics.items()},
        samples=[f.sample() for f in figures], n=len(figures), truncated=0, empty=0, requests=requests,
        task_hash=None, raw=raw_bytes(lines),
    )
