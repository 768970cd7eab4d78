"""A workload's context-length sweep: its own prompt text cut to each input length.

The seeds show decode speed across context lengths at a fixed output budget (a synchronous GuideLLM sweep,
256 output tokens): speed and acceptance shift with context. `vllm bench serve`'s `random` dataset would
give random token ids, text no draft predicts, so a speculative config's acceptance would describe noise;
here each sweep prompt is the workload's own prompts' text, token ids from the served artifact's tokenizer,
concatenated (prompt i starts from the i-th prompt, so prompts differ) and cut to `input_len` ids, then
decoded. That is the prompt's length before the chat template, which the server adds; decoding a cut id
sequence and encoding it again can differ by a token or two at the cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, cast

from hfrelease.errors import MeasurementError
from hfrelease.manifest.input_files import read_workload_prompts


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...


def load_tokenizer(directory: str) -> Tokenizer:
    """The served artifact's tokenizer, from its local files (nothing is fetched)."""
    from transformers import AutoTokenizer

    return cast(Tokenizer, AutoTokenizer.from_pretrained(directory, local_files_only=True))


def context_prompts(source: Path, *, tokenizer: Tokenizer, input_len: int, count: int) -> bytes:
    """`count` prompts of `input_len` tokens each, made from the prompts of `source` (a workload's JSONL),
    as the JSONL `vllm bench serve --dataset-name custom` reads."""
    texts = [str(json.loads(line)["prompt"]) for line in read_workload_prompts(source).splitlines() if line.strip()]
    ids = [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    if not any(ids):
        raise MeasurementError(f"{source}: its prompts have no tokens to make a context sweep from")
    lines = []
    for i in range(count):
        stream: list[int] = []
        j = i
        while len(stream) < input_len:
            stream += ids[j % len(ids)]
            j += 1
        lines.append(json.dumps({"prompt": tokenizer.decode(stream[:input_len])}, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode("utf-8")
