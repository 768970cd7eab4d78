"""Register the demo family's architecture name with vLLM (runs in every vLLM process)."""

ARCHITECTURE = "HfreleaseDemoForCausalLM"


def register() -> None:
    # Imported here: vLLM calls register() in each process it starts; importing at module level would
    # make `pip install` or a plain import of this package pull in vLLM.
    from vllm import ModelRegistry

    if ARCHITECTURE not in ModelRegistry.get_supported_archs():
        # The demo model is Llama-shaped: vLLM's own Llama implementation serves it. The point of the
        # plugin is the mechanism (a family architecture vLLM does not know without it), as with the
        # looped Nanbeige architecture of the flagship family.
        ModelRegistry.register_model(ARCHITECTURE, "vllm.model_executor.models.llama:LlamaForCausalLM")
