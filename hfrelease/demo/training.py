"""Training the demo models on the synthetic corpus: a plain, seeded, CPU-sized loop."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.demo.data import TrainingCorpus
from hfrelease.demo.model import ModelSpec, TokenIds, llama_config
from hfrelease.demo.tokenizer import ENDOFTEXT, assistant_target

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

IGNORE_INDEX = -100

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingPlan:
    """How long and how hard to train one model."""

    steps: int
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 30
    # Steps after which ``on_snapshot`` is called (e.g. to keep an under-trained checkpoint).
    snapshot_steps: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Example:
    """One tokenized training sequence; ``labels`` is IGNORE_INDEX where no loss is taken."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]


def encode_corpus(corpus: TrainingCorpus, tokenizer: PreTrainedTokenizerBase) -> list[Example]:
    """Render every chat through the real chat template (both thinking modes) and tokenize.

    The prompt and the target are tokenized separately, exactly as at serving time (vLLM tokenizes
    the rendered prompt, the model generates the rest), and loss is taken on the target only.
    """
    examples: list[Example] = []
    for chat in corpus.chats:
        for thinking in (True, False):
            prompt = tokenizer.apply_chat_template(
                [{"role": "user", "content": chat.prompt}],
                add_generation_prompt=True,
                tokenize=False,
                enable_thinking=thinking,
            )
            if not isinstance(prompt, str):
                raise TypeError(f"chat template rendered {type(prompt).__name__}, not str")
            target = assistant_target(reasoning=chat.reasoning, answer=chat.answer, thinking=thinking)
            p_ids = _ids(tokenizer, prompt)
            t_ids = _ids(tokenizer, target)
            examples.append(
                Example(
                    input_ids=tuple(p_ids + t_ids),
                    labels=tuple((p_ids if chat.learn_prompt else [IGNORE_INDEX] * len(p_ids)) + t_ids),
                )
            )
    for text in corpus.texts:
        ids = _ids(tokenizer, text + ENDOFTEXT)
        examples.append(Example(input_ids=tuple(ids), labels=tuple(ids)))
    return examples


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [int(i) for i in ids]


def token_ids(tokenizer: PreTrainedTokenizerBase) -> TokenIds:
    """The ids a model config needs from ``tokenizer``."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id
    if not isinstance(eos, int) or not isinstance(pad, int):
        raise TypeError("the demo tokenizer must define single eos and pad tokens")
    return TokenIds(vocab_size=len(tokenizer), eos_token_id=eos, pad_token_id=pad)


def train_model(
    spec: ModelSpec,
    ids: TokenIds,
    examples: Sequence[Example],
    plan: TrainingPlan,
    *,
    seed: int,
    on_snapshot: Callable[[int, LlamaForCausalLM], None] | None = None,
    progress: Progress | None = None,
) -> LlamaForCausalLM:
    """Train a freshly initialised model of shape ``spec`` on ``examples``; return it in float32."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(spec, ids))  # type: ignore[no-untyped-call]
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=plan.learning_rate, betas=(0.9, 0.98), weight_decay=0.0)

    def lr_factor(step: int) -> float:
        # Linear warm-up, then cosine decay to 10 %: stable for a tiny model at a high rate.
        if step < plan.warmup_steps:
            return (step + 1) / plan.warmup_steps
        t = (step - plan.warmup_steps) / max(1, plan.steps - plan.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * t))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    rng = random.Random(seed)  # noqa: S311 (reproducible batch order, not secrets)
    batches: list[list[int]] = []
    started = time.monotonic()
    for step in range(plan.steps):
        if not batches:
            batches = _epoch_batches(examples, plan.batch_size, rng)
        input_ids, labels = _collate([examples[i] for i in batches.pop()], ids.pad_token_id)
        # Right padding with IGNORE_INDEX labels needs no attention mask: causal attention never
        # lets a real token see the padding after it, and skipping the mask keeps SDPA fast.
        loss = model(input_ids=input_ids, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        done = step + 1
        if progress is not None and (done % 100 == 0 or done == plan.steps):
            elapsed = time.monotonic() - started
            progress(f"step {done}/{plan.steps} loss {loss.item():.4f} ({elapsed:.0f}s)")
        if on_snapshot is not None and done in plan.snapshot_steps:
            model.eval()  # type: ignore[no-untyped-call]
            on_snapshot(done, model)
            model.train()
    model.eval()  # type: ignore[no-untyped-call]
    return model


def _epoch_batches(examples: Sequence[Example], size: int, rng: random.Random) -> list[list[int]]:
    """One shuffled epoch cut into batches of similar length.

    The copy examples are ~4x longer than the rest; sorting each window of 8 batches by length
    before cutting keeps padding (wasted CPU time) small while the order stays random.
    """
    order = list(range(len(examples)))
    rng.shuffle(order)
    window = 8 * size
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: len(examples[i].input_ids))
        batches.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
    rng.shuffle(batches)
    return batches


def _collate(batch: Sequence[Example], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(e.input_ids) for e in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
    for row, example in enumerate(batch):
        n = len(example.input_ids)
        input_ids[row, :n] = torch.tensor(example.input_ids)
        labels[row, :n] = torch.tensor(example.labels)
    return input_ids, labels


def save_model(model: LlamaForCausalLM, out_dir: Path, *, dtype: str) -> None:
    """Save ``model`` as safetensors in ``dtype`` ("bfloat16" or "float32") without touching it."""
    import copy

    import torch

    target = copy.deepcopy(model).to(getattr(torch, dtype))
    target.config.dtype = dtype
    out_dir.mkdir(parents=True, exist_ok=True)
    target.save_pretrained(str(out_dir))


if TYPE_CHECKING:
    import torch
