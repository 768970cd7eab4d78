"""A randomly initialised EAGLE-3 head for the demo reference, in the layout vLLM's eagle3 loader reads.

It is untrained on purpose: its drafts are noise, so speculative decoding accepts almost nothing, and
the speed anchors' acceptance arithmetic and draft gates are tested against a head that must fail
them (the trained `draft` model is the one that passes). Building it takes well under a second.

Layout (vllm/model_executor/models/llama_eagle3.py, `Eagle3LlamaForCausalLM`): architecture
`LlamaForCausalLMEagle3`, one decoder layer stored as `midlayer.*` whose attention reads the token
embedding and the fused hidden state side by side (q/k/v take 2 x hidden_size inputs), `fc` fusing the
target's auxiliary hidden states (3 x hidden_size -> hidden_size), `norm`, `lm_head` over the full
vocabulary (no draft-to-target id map needed) and its own `embed_tokens`. vLLM's default auxiliary
layers for a 4-layer target are (2, 2, 1), so the config names them
(`eagle_aux_hidden_state_layer_ids`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# Inputs to target layers 1, 2 and 3 of the 4-layer reference: early, middle, late.
AUX_LAYER_IDS = (1, 2, 3)
# Files copied from the target so the head directory has the same servable layout as every artifact.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def eagle3_config(target: dict[str, object]) -> dict[str, object]:
    """The head's config.json, shaped after the target's config."""
    hidden = target["hidden_size"]
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "target_hidden_size": hidden,
        "intermediate_size": target["intermediate_size"],
        "num_attention_heads": target["num_attention_heads"],
        "num_key_value_heads": target["num_key_value_heads"],
        "head_dim": target["head_dim"],
        "num_hidden_layers": 1,
        "vocab_size": target["vocab_size"],
        "draft_vocab_size": target["vocab_size"],
        "max_position_embeddings": target["max_position_embeddings"],
        "rms_norm_eps": target["rms_norm_eps"],
        "rope_parameters": target.get("rope_parameters"),
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "eos_token_id": target.get("eos_token_id"),
        "pad_token_id": target.get("pad_token_id"),
        "dtype": target.get("dtype", "bfloat16"),
        "eagle_aux_hidden_state_layer_ids": list(AUX_LAYER_IDS),
        "num_aux_hidden_states": len(AUX_LAYER_IDS),
    }


def write_eagle3_head(target_dir: Path, out_dir: Path, *, seed: int) -> Path:
    """Write an untrained EAGLE-3 head for the model in `target_dir` into `out_dir`."""
    import torch
    from safetensors.torch import save_file

    target = json.loads((target_dir / "config.json").read_text(encoding="utf-8"))
    config = eagle3_config(target)
    hidden = int(target["hidden_size"])
    inter = int(target["intermediate_size"])
    head_dim = int(target["head_dim"])
    q_out = int(target["num_attention_heads"]) * head_dim
    kv_out = int(target["num_key_value_heads"]) * head_dim
    vocab = int(target["vocab_size"])
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape: int) -> torch.Tensor:
        # The initializer_range of the demo models: small weights, drafts that are uniformly wrong.
        return torch.randn(*shape, generator=generator) * 0.02

    tensors = {
        "embed_tokens.weight": normal(vocab, hidden),
        "fc.weight": normal(hidden, len(AUX_LAYER_IDS) * hidden),
        "midlayer.input_layernorm.weight": torch.ones(hidden),
        "midlayer.hidden_norm.weight": torch.ones(hidden),
        "midlayer.self_attn.q_proj.weight": normal(q_out, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": normal(kv_out, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": normal(kv_out, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": normal(hidden, q_out),
        "midlayer.post_attention_layernorm.weight": torch.ones(hidden),
        "midlayer.mlp.gate_proj.weight": normal(inter, hidden),
        "midlayer.mlp.up_proj.weight": normal(inter, hidden),
        "midlayer.mlp.down_proj.weight": normal(hidden, inter),
        "norm.weight": torch.ones(hidden),
        "lm_head.weight": normal(vocab, hidden),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}, str(out_dir / "model.safetensors"),
              metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name in _TOKENIZER_FILES:
        if (target_dir / name).is_file():
            shutil.copy2(target_dir / name, out_dir / name)
    return out_dir
