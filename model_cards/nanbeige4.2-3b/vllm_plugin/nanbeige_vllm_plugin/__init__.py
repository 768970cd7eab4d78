"""The Nanbeige4.2-3B family's vLLM plugin (the `vllm.general_plugins` entry point `register`).

- `LoopedLlamaForCausalLM`: the looped architecture (a Llama-style stack run `num_loops` times over the same
  weights, `num_loops` read from the HF config), until vLLM serves it upstream (vLLM PR #49433).
- EAGLE-3 drafts of a looped target: their layer named, and `target_layer_count` stamped, at the target's
  virtual depth (num_hidden_layers x num_loops), not at its physical layer count.

The arithmetic of the virtual depth is in `depth` (no vLLM import).
"""

ARCHITECTURE = "LoopedLlamaForCausalLM"
# The draft architectures vLLM maps to its Eagle3LlamaForCausalLM (vllm/model_executor/models/registry.py,
# _SPECULATIVE_DECODING_MODELS) that a Llama-style draft of a looped target uses.
DRAFT_ARCHITECTURES = ("Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3")


def register() -> None:
    # vLLM calls register() in every process it starts; the model classes are named as strings so that vLLM
    # imports them (and torch) only when a config asks for them, and `pip install` imports nothing.
    from vllm import ModelRegistry

    if ARCHITECTURE not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCHITECTURE, "nanbeige_vllm_plugin.looped_llama:LoopedLlamaForCausalLM")
    for draft in DRAFT_ARCHITECTURES:
        # Replaces vLLM's own class for these names; for a draft of a plain (unlooped) target it builds
        # exactly what vLLM's does.
        ModelRegistry.register_model(draft, "nanbeige_vllm_plugin.eagle3:LoopedEagle3LlamaForCausalLM")
