"""Virtual depth of a looped decoder stack: pure arithmetic, no vLLM import (unit-tested on its own).

A looped model runs its `num_hidden_layers` physical layers `num_loops` times per token over the same
weights. Unrolled, that is `num_hidden_layers * num_loops` *virtual* layers: virtual layer v is physical
layer v % N on loop v // N. Everything vLLM indexes by layer -- each pass's KV cache (its attention layer
name), the EAGLE-3 auxiliary hidden-state taps, the draft's own layer name after the target's -- is
counted over the virtual depth, since each pass attends over its own keys and values.
"""

from __future__ import annotations

import re
from typing import Any

# The attention layer name's one integer (vLLM's extract_layer_index requires exactly one).
_LAYER_INDEX = re.compile(r"(?<=\blayers\.)\d+(?=\.|$)")


def num_loops(config: Any) -> int:
    """The `num_loops` of an HF config (1 when absent: a plain stack); anything else than an integer >= 1 is refused."""
    loops = getattr(config, "num_loops", None)
    if loops is None:
        return 1
    if isinstance(loops, bool) or not isinstance(loops, int) or loops < 1:
        raise ValueError(f"config.num_loops must be an integer >= 1, got {loops!r}")
    return loops


def virtual_depth(num_layers: int, loops: int) -> int:
    """How many layers the unrolled stack has."""
    if num_layers < 1 or loops < 1:
        raise ValueError(f"num_hidden_layers ({num_layers}) and num_loops ({loops}) must be >= 1")
    return num_layers * loops


def virtual_layer(loop: int, layer: int, num_layers: int) -> int:
    """The virtual index of physical `layer` on pass `loop` (both counted from 0)."""
    if not 0 <= layer < num_layers or loop < 0:
        raise ValueError(f"layer {layer} on loop {loop} is outside a stack of {num_layers} layers")
    return loop * num_layers + layer


def physical_layer(virtual: int, num_layers: int, loops: int) -> tuple[int, int]:
    """(loop, physical layer) of virtual layer `virtual`."""
    if not 0 <= virtual < virtual_depth(num_layers, loops):
        raise ValueError(f"virtual layer {virtual} is outside 0..{virtual_depth(num_layers, loops) - 1}")
    return divmod(virtual, num_layers)


def virtual_layer_name(name: str, virtual: int) -> str:
    """`name` (a layer's module prefix, e.g. `model.layers.3.self_attn.attn`) renumbered to virtual layer
    `virtual`: the name vLLM keys that pass's KV cache by."""
    renamed, count = _LAYER_INDEX.subn(str(virtual), name)
    if count != 1:
        raise ValueError(f"{name!r} does not hold exactly one 'layers.<index>'")
    return renamed


def default_aux_layers(depth: int) -> tuple[int, int, int]:
    """vLLM's default EAGLE-3 taps (early, middle, late: 2, D // 2, D - 3), over the virtual depth D."""
    return (2, depth // 2, depth - 3)


def check_aux_layers(layers: tuple[int, ...] | list[int], depth: int) -> None:
    """Refuse EAGLE-3 taps outside the virtual depth (vLLM would silently return fewer hidden states)."""
    outside = [layer for layer in layers if not 0 <= layer <= depth]
    if outside:
        raise ValueError(f"EAGLE-3 aux hidden-state layers {outside} are outside the virtual depth 0..{depth}")
