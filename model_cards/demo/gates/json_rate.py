#!/usr/bin/env python3
"""Custom gate: the rate at which a served model answers "Describe item N as JSON." with valid JSON.

    python json_rate.py --base-url http://127.0.0.1:8000/v1 --model NAME \
        --prompts demo_json.jsonl --out result.json [--limit N] [--no-thinking]

Calls the server's OpenAI-compatible /v1/chat/completions (standard library only, greedy) and
writes {"metrics": {...}, "stderr": {...}, "counts": {...}, "samples": [...]}. A response is
valid when its content, after any <think>...</think> block, parses as a JSON object; it also
"matches" when that object equals the prompt row's ``expected``. Truncated answers
(finish_reason "length") and empty contents are counted, since they are failed measurements.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_THINK_BLOCK = re.compile(r"(?s)^.*</think>")


def chat_url(base_url: str) -> str:
    """The chat completions endpoint for a base URL given with or without its /v1."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


def answer_text(content: str) -> str:
    """The answer part of a message content: what follows the last </think>, trimmed."""
    return _THINK_BLOCK.sub("", content).strip()


def parse_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None when it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def ask(
    url: str, model: str, prompt: str, *, max_tokens: int, thinking: bool, timeout: float, seed: int = 1234
) -> dict[str, Any]:
    """One greedy chat completion; returns the response's first choice."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": seed,
    }
    if not thinking:
        payload["chat_template_kwargs"] = {"enable_thinking": False}
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url}")
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    api_key = os.environ.get("OPENAI_API_KEY")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (scheme checked above)
        body: dict[str, Any] = json.load(response)
    choice: dict[str, Any] = body["choices"][0]
    return choice


def _stderr(rate: float, n: int) -> float:
    # Standard error of a mean of 0/1 outcomes, with the sample variance (as lm-eval reports it).
    return math.sqrt(rate * (1.0 - rate) / (n - 1)) if n > 1 else 0.0


def evaluate(
    rows: list[dict[str, Any]],
    *,
    url: str,
    model: str,
    max_tokens: int,
    thinking: bool,
    concurrency: int,
    timeout: float,
    seed: int = 1234,
) -> dict[str, Any]:
    """Ask every prompt and score the answers; returns the result document."""

    def one(row: dict[str, Any]) -> dict[str, Any]:
        choice = ask(url, model, row["prompt"], max_tokens=max_tokens, thinking=thinking, timeout=timeout, seed=seed)
        message = choice.get("message") or {}
        content = message.get("content") or ""
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        obj = parse_object(answer_text(content))
        return {
            "id": row["id"],
            "prompt": row["prompt"],
            "response": content,
            "reasoning": reasoning,
            "finish_reason": choice.get("finish_reason"),
            "valid": obj is not None,
            "match": obj is not None and "expected" in row and obj == row["expected"],
            # hfrelease's custom-gate contract: the gate's metric per sample (for paired deltas), and
            # whether the answer was cut off by the budget or came back empty.
            "scores": {
                "json_valid_rate": 1.0 if obj is not None else 0.0,
                "json_match_rate": 1.0 if obj is not None and obj == row.get("expected") else 0.0,
            },
            "truncated": choice.get("finish_reason") == "length",
            "empty": not content.strip(),
        }

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        samples = list(pool.map(one, rows))
    n = len(samples)
    valid = sum(s["valid"] for s in samples) / n if n else 0.0
    match = sum(s["match"] for s in samples) / n if n else 0.0
    return {
        "metrics": {"json_valid_rate": valid, "json_match_rate": match},
        "stderr": {"json_valid_rate": _stderr(valid, n), "json_match_rate": _stderr(match, n)},
        "counts": {
            "n": n,
            "truncated": sum(s["finish_reason"] == "length" for s in samples),
            "empty": sum(not s["response"].strip() for s in samples),
        },
        "config": {"model": model, "url": url, "max_tokens": max_tokens, "thinking": thinking},
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the gate, write the result; exit code 0 when it ran."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--prompts", type=Path, required=True, help="JSONL: id, prompt, expected")
    parser.add_argument("--out", type=Path, required=True, help="where to write the result JSON")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--no-thinking", action="store_true", help="send chat_template_kwargs enable_thinking=false")
    parser.add_argument("--mode", choices=["thinking", "non-thinking"], help="hfrelease's name for the switch")
    parser.add_argument("--seed", type=int, default=None, help="sampling seed sent with every request")
    args = parser.parse_args(argv)
    if args.mode is not None:
        args.no_thinking = args.mode == "non-thinking"

    lines = args.prompts.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    if args.limit is not None:
        rows = rows[: args.limit]
    result = evaluate(
        rows,
        url=chat_url(args.base_url),
        model=args.model,
        max_tokens=args.max_tokens,
        thinking=not args.no_thinking,
        concurrency=args.concurrency,
        timeout=args.timeout,
        seed=1234 if args.seed is None else args.seed,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(json.dumps(result["metrics"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
