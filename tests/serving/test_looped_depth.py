"""The flagship plugin's virtual-depth arithmetic (model_cards/nanbeige4.2-3b/vllm_plugin/, module `depth`).

Loaded from its file: the plugin is the family's package, not part of hfrelease, and `depth` imports no vLLM.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType, SimpleNamespace

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

PLUGIN = ROOT / "model_cards" / "nanbeige4.2-3b" / "vllm_plugin"


def _depth() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nanbeige_depth", PLUGIN / "nanbeige_vllm_plugin" / "depth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


depth = _depth()


def test_the_flagship_taps_are_virtual_layers_of_both_passes() -> None:
    """22 layers x 2 loops = 44 virtual layers; the draft's taps 3, 23, 41 fall in loop 1, loop 2, loop 2
    (the manifest's aux_hidden_state_layer_ids and the EAGLE-3 card's story)."""
    assert depth.virtual_depth(22, 2) == 44
    assert [depth.physical_layer(v, 22, 2) for v in (3, 23, 41)] == [(0, 3), (1, 1), (1, 19)]
    assert depth.virtual_layer(1, 0, 22) == 22  # the name vLLM's unpatched draft would take
    depth.check_aux_layers([3, 23, 41], 44)
    with pytest.raises(ValueError, match=r"\[45\] are outside the virtual depth 0\.\.44"):
        depth.check_aux_layers([3, 45], 44)


def test_virtual_layer_round_trips_over_every_pass() -> None:
    for layers, loops in ((1, 1), (2, 2), (22, 2), (5, 3)):
        seen = [depth.virtual_layer(loop, layer, layers) for loop in range(loops) for layer in range(layers)]
        assert seen == list(range(depth.virtual_depth(layers, loops)))
        assert [depth.physical_layer(v, layers, loops) for v in seen] == [
            (loop, layer) for loop in range(loops) for layer in range(layers)]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: depth.physical_layer(44, 22, 2), "outside 0..43"),
    (lambda: depth.virtual_layer(0, 22, 22), "outside a stack of 22"),
    (lambda: depth.virtual_depth(0, 2), "must be >= 1"),
])
def test_indices_outside_the_stack_are_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_each_pass_gets_its_own_attention_name() -> None:
    """Pass 2 of layer 3 of a 22-layer stack is keyed (its KV cache) as layer 25; one integer in the name."""
    assert depth.virtual_layer_name("model.layers.3.self_attn.attn", 25) == "model.layers.25.self_attn.attn"
    assert depth.virtual_layer_name("layers.0", 22) == "layers.22"
    with pytest.raises(ValueError, match="exactly one"):
        depth.virtual_layer_name("model.embed_tokens", 1)


def test_num_loops_from_the_config() -> None:
    assert depth.num_loops(SimpleNamespace()) == 1  # a plain Llama
    assert depth.num_loops(SimpleNamespace(num_loops=2)) == 2
    for bad in (0, -1, 2.0, True, "2"):
        with pytest.raises(ValueError, match="num_loops must be an integer >= 1"):
            depth.num_loops(SimpleNamespace(num_loops=bad))


def test_default_taps_span_the_virtual_depth() -> None:
    """vLLM's defaults (2, D//2, D-3) over D = 44, not over the 22 physical layers (all in pass 1)."""
    assert depth.default_aux_layers(44) == (2, 22, 41)
