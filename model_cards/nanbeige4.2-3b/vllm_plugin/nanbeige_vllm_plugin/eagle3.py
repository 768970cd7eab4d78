"""EAGLE-3 drafts of a looped target: the draft's layer named after the target's *virtual* depth.

vLLM's Eagle3LlamaForCausalLM names its decoder layer `model.layers.<target layers>` and stamps
`target_layer_count = <target layers>` into the draft config (which Llama attention subtracts to index the
draft's `layer_types`), with <target layers> = the target's `num_hidden_layers`. For a looped target
(22 layers x 2 loops) that is 22, the name of the target's loop-2 attention of layer 0: vLLM refuses the
draft ("Duplicate layer name: model.layers.22.self_attn.attn"), and the stamp mis-indexes `layer_types`.
Here both use the virtual depth (44); for a plain target (no `num_loops`) nothing changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from vllm.config import VllmConfig
from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

from nanbeige_vllm_plugin.depth import num_loops, virtual_depth


@contextlib.contextmanager
def _target_counted_at_virtual_depth(vllm_config: VllmConfig) -> Iterator[None]:
    """While the draft is built, the target's layer count reads as its virtual depth (restored after)."""
    target = vllm_config.model_config
    arch: Any = target.model_arch_config
    physical = arch.total_num_hidden_layers
    arch.total_num_hidden_layers = virtual_depth(physical, num_loops(target.hf_config))
    try:
        yield
    finally:
        arch.total_num_hidden_layers = physical


class LoopedEagle3LlamaForCausalLM(Eagle3LlamaForCausalLM):
    """vLLM's EAGLE-3 Llama draft, named and stamped at the target's virtual depth."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        with _target_counted_at_virtual_depth(vllm_config):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
