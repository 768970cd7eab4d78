"""A looped Llama-style decoder for vLLM: the stack of `num_hidden_layers` layers run `num_loops` times per
token over the same weights (Nanbeige4.2: 22 layers x 2 loops).

Subclasses of vLLM's own Llama (vllm.model_executor.models.llama), so weights, quantization, tensor
parallelism and EAGLE-3 support are Llama's. What the loop changes:

- Each pass attends over its own keys and values: pass k of physical layer i is virtual layer k*N + i, and
  gets its own vLLM `Attention` (its own KV cache) named at that virtual index. The projections and norms
  are shared; only the KV cache is per pass.
- The EAGLE-3 taps (`eagle_aux_hidden_state_layer_ids`) are virtual indices: tap v is the hidden state
  entering virtual layer v, as vLLM counts them for a plain stack.
- Pipeline parallelism is refused: every pass needs every layer.

Imported by vLLM's model registry only when a config names the architecture (see register()).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from vllm.config import VllmConfig
from vllm.distributed import get_pp_group
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.models.llama import LlamaAttention, LlamaDecoderLayer, LlamaForCausalLM, LlamaModel
from vllm.model_executor.models.utils import extract_layer_index
from vllm.sequence import IntermediateTensors

from nanbeige_vllm_plugin.depth import (
    check_aux_layers,
    default_aux_layers,
    num_loops,
    virtual_depth,
    virtual_layer,
    virtual_layer_name,
)


class LoopedLlamaAttention(LlamaAttention):
    """Llama attention with one KV cache per pass: `attn` for loop 0, `loop_attn[f"loop{k}"]` for loop k."""

    def __init__(self, config: Any, *args: Any, prefix: str = "", **kwargs: Any) -> None:
        super().__init__(config, *args, prefix=prefix, **kwargs)
        layers = config.num_hidden_layers
        layer = extract_layer_index(prefix)
        # Keyed loop<k>, not by integer: vLLM expects one integer in a module path (extract_layer_index).
        self.loop_attn = nn.ModuleDict({
            f"loop{loop}": Attention(
                self.num_heads, self.head_dim, self.scaling, num_kv_heads=self.num_kv_heads,
                cache_config=kwargs.get("cache_config"), quant_config=kwargs.get("quant_config"),
                per_layer_sliding_window=self.attn.sliding_window, attn_type=self.attn.attn_type,
                prefix=virtual_layer_name(f"{prefix}.attn", virtual_layer(loop, layer, layers)),
            )
            for loop in range(1, num_loops(config))
        })

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, loop: int = 0) -> torch.Tensor:
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q, k = self.rotary_emb(positions, q, k)
        attn = self.attn if loop == 0 else self.loop_attn[f"loop{loop}"]
        output, _ = self.o_proj(attn(q, k, v))
        return output


class LoopedLlamaDecoderLayer(LlamaDecoderLayer):
    """Llama's decoder layer, told which pass it runs (its attention's KV cache is per pass)."""

    def __init__(self, vllm_config: VllmConfig, prefix: str = "", config: Any = None,
                 attn_layer_type: type[nn.Module] = LoopedLlamaAttention) -> None:
        super().__init__(vllm_config, prefix=prefix, config=config, attn_layer_type=attn_layer_type)

    def forward(  # type: ignore[override]
        self, positions: torch.Tensor, hidden_states: torch.Tensor, residual: torch.Tensor | None, loop: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states, loop=loop)
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        return self.mlp(hidden_states), residual


class LoopedLlamaModel(LlamaModel):
    """The decoder stack, run `num_loops` times; EAGLE-3 taps counted over the virtual depth."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "",
                 layer_type: type[nn.Module] = LoopedLlamaDecoderLayer) -> None:
        config = vllm_config.model_config.hf_config
        if get_pp_group().world_size > 1:
            raise ValueError("a looped model runs every layer on every pass: pipeline parallelism is not supported")
        self.num_loops = num_loops(config)
        self.virtual_depth = virtual_depth(config.num_hidden_layers, self.num_loops)
        super().__init__(vllm_config=vllm_config, prefix=prefix, layer_type=layer_type)

    def forward(  # type: ignore[override]
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        intermediate_tensors: IntermediateTensors | None,
        inputs_embeds: torch.Tensor | None = None,
        **extra_layer_kwargs: Any,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        hidden_states = inputs_embeds if inputs_embeds is not None else self.embed_input_ids(input_ids)
        residual: torch.Tensor | None = None
        aux_hidden_states: list[torch.Tensor] = []
        self._maybe_add_hidden_state(aux_hidden_states, 0, hidden_states, residual)
        layers = len(self.layers)
        for loop in range(self.num_loops):
            for index, layer in enumerate(self.layers):
                hidden_states, residual = layer(positions, hidden_states, residual, loop=loop, **extra_layer_kwargs)
                self._maybe_add_hidden_state(
                    aux_hidden_states, virtual_layer(loop, index, layers) + 1, hidden_states, residual
                )
        hidden_states, _ = self.norm(hidden_states, residual)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states


class LoopedLlamaForCausalLM(LlamaForCausalLM):
    """vLLM's Llama with the looped stack (`num_loops` from the HF config; 1 serves a plain Llama)."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "",
                 layer_type: type[nn.Module] = LoopedLlamaDecoderLayer) -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix, layer_type=layer_type)

    def _init_model(self, vllm_config: VllmConfig, prefix: str = "",
                    layer_type: type[nn.Module] = LoopedLlamaDecoderLayer) -> LoopedLlamaModel:
        return LoopedLlamaModel(vllm_config=vllm_config, prefix=prefix, layer_type=layer_type)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        # vLLM counts len(model.layers) (the physical stack): the taps would all fall in the first pass.
        return default_aux_layers(self.model.virtual_depth)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        # A tap past the physical stack is legal here (virtual depth); one past the virtual depth would make
        # vLLM hand the draft fewer hidden states than its fc layer takes, and fail far from the cause.
        check_aux_layers(layers, self.model.virtual_depth)
        super().set_aux_hidden_state_layers(layers)
