"""Shapes of the demo models: a tiny Llama reference and a one-layer draft sharing its tokenizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import LlamaConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """Architecture of one demo model (Llama layout, the one vLLM serves best on CPU)."""

    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    # vLLM's CPU attention backend supports only some head sizes (32, 64, 80, ...).
    head_dim: int = 32
    max_position_embeddings: int = 1024


# ~1.0 M parameters: big enough to memorise the demo tasks in ~1500 steps (~2 min on 2 cores).
REFERENCE_SPEC = ModelSpec(num_layers=4, hidden_size=128, intermediate_size=384, num_heads=4, num_kv_heads=2)
# Same width, one layer: cheap enough to speculate with, trained on the same data so that it
# agrees with the reference on most tokens.
DRAFT_SPEC = ModelSpec(num_layers=1, hidden_size=128, intermediate_size=384, num_heads=4, num_kv_heads=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenIds:
    """The tokenizer ids the model config must name."""

    vocab_size: int
    eos_token_id: int
    pad_token_id: int


def llama_config(spec: ModelSpec, ids: TokenIds) -> LlamaConfig:
    """The transformers config for ``spec``; ``ids.vocab_size`` is rounded up for aligned matmuls."""
    from transformers import LlamaConfig

    # Pad the embedding to a multiple of 64: quantized and CPU GEMM kernels want aligned shapes.
    vocab = -(-ids.vocab_size // 64) * 64
    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=ids.eos_token_id,
        pad_token_id=ids.pad_token_id,
        initializer_range=0.02,
    )
