"""Seeds for sampled gates: one run per seed, recorded apart, judged together.

A gate with `seeds = [s1, s2, ...]` is measured as one run per seed, each the gate with `seed = s` (and no
`seeds`): lm-eval's four generators and every request's `seed` (vLLM's per-request sampling seed) get `s`, a
custom gate gets `--seed s`. Each run is recorded under its own input key, which is exactly the key a
single-run gate with `seed = s` has, so a warm re-run reuses every seed already measured and adding a seed
measures only that seed.

The runs are judged together: per item (document), the mean of its figure over all seeds, then the paired
bootstrap over items (`hfrelease.verdicts.comparison`). Resampling an item's seed-mean is resampling the
item with all of its seeds kept together: the same answers to one question under several seeds are not
independent evidence, and drawing them apart would narrow the interval. An item counts only when every seed
scored it (on each side); the others are left out of the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from hfrelease.ledger.record import Sample
from hfrelease.manifest import Gate

# Per seed, that run's samples.
SeedSamples = Mapping[int, Sequence[Sample]]


def gate_seeds(gate: Gate) -> tuple[int, ...]:
    """The seeds `gate` runs with: its `seeds`, else its one `seed`."""
    return tuple(gate.seeds) if gate.seeds is not None else (gate.seed,)


def seed_runs(gate: Gate) -> tuple[Gate, ...]:
    """One gate per seed, each with `seed` set and no `seeds`; a gate without `seeds` is its own only run."""
    if gate.seeds is None:
        return (gate,)
    return tuple(gate.model_copy(update={"seed": seed, "seeds": None}) for seed in gate.seeds)


def item_means(runs: SeedSamples, figure: Callable[[Sample], float]) -> tuple[dict[str, float], int]:
    """Per item scored by every run, the mean of `figure` over the runs; and how many items some run lacks."""
    if not runs:
        return {}, 0
    # In seed order, so the sums do not depend on the order the runs were found in.
    maps = [{s.doc_id: figure(s) for s in runs[seed]} for seed in sorted(runs)]
    common = set(maps[0]).intersection(*maps[1:])
    partial = set().union(*maps) - common
    return {doc: math.fsum(m[doc] for m in maps) / len(maps) for doc in sorted(common)}, len(partial)
