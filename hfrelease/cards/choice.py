"""What a reader gets from each artifact, as plain numbers, and which artifact is no choice at all.

The choice table ranks the family's artifacts by what a reader gets (the quality verdict, absolute
batch-1 tok/s, memory to serve, weights) and says "dominated by X" when another published artifact is at
least as good on every one of those and better on one. Equal means equal as measured: two tok/s figures
whose ratio's 95 % interval between server sessions holds 1 (the host's session noise, README "How speed
verdicts decide"; where none was measured, whose repeats' ranges overlap), or two sizes less than about
1 % apart (the demo's two quants differ by 144 bytes of 1.2 MiB, which once made one of them "the smallest
that passes").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hfrelease.speed.noise import SessionNoise

SIZE_TOLERANCE = 0.01  # sizes (weights, memory to serve) closer than this share of the larger are equal

# Quality levels: a verdict, not a score. The reference's weights are the original (nothing a quant gives
# beats them on quality, so the reference is never dominated); passing every gate means "no loss beyond
# the margin"; a failed gate is worse; unjudged is unknown. The ranking counts the reference as passing.
ORIGINAL = 3
PASSES = 2
FAILS = 0


@dataclass(frozen=True, kw_only=True)
class Facts:
    """One artifact's columns of the choice table, as numbers (None: not measured or not judged)."""

    artifact_id: str
    published: bool
    quality: int | None
    tps: tuple[float, float, float] | None  # median, slowest and fastest repeat of batch-1 output tok/s
    memory: float | None  # bytes to serve
    size: float | None  # bytes of weights


def same_size(a: float, b: float) -> bool:
    return abs(a - b) <= SIZE_TOLERANCE * max(abs(a), abs(b))


def compare_speed(a: tuple[float, float, float], b: tuple[float, float, float],
                  noise: SessionNoise | None = None) -> int:
    """1 when `a` is faster than `b`, -1 when slower, 0 when equal as measured: the 95 % interval of a / b
    between server sessions holds 1 (with the host's session `noise`), else their repeats' ranges overlap
    or, for single runs, the medians are within the size tolerance."""
    if same_size(a[0], b[0]):
        return 0
    if noise is not None and a[0] > 0 and b[0] > 0:
        low, high = noise.ratio_interval(b[0], a[0])
        if low <= 1 <= high:
            return 0
    elif a[1] <= b[2] and b[1] <= a[2]:
        return 0
    return 1 if a[0] > b[0] else -1


def _compare_smaller(a: float, b: float) -> int:
    if same_size(a, b):
        return 0
    return 1 if a < b else -1


def compare(a: Facts, b: Facts, noise: SessionNoise | None = None) -> list[int] | None:
    """Per column, 1 where `a` is better than `b`, -1 where worse, 0 where equal; None when a column is
    unknown on either side (nothing is dominated on a figure nobody measured)."""
    if a.quality is None or b.quality is None or a.tps is None or b.tps is None:
        return None
    if a.memory is None or b.memory is None or a.size is None or b.size is None:
        return None
    return [(a.quality > b.quality) - (a.quality < b.quality), compare_speed(a.tps, b.tps, noise),
            _compare_smaller(a.memory, b.memory), _compare_smaller(a.size, b.size)]


def dominated_by(facts: Facts, others: Iterable[Facts], noise: SessionNoise | None = None) -> Facts | None:
    """The published artifact that passes its gates and is at least as good as `facts` on every column and
    better on one (the fastest of them when several are), or None: an artifact that fails a gate is never
    the one to choose instead."""
    winners = [o for o in others if o.published and o.artifact_id != facts.artifact_id
               and o.quality is not None and o.quality >= PASSES
               and (c := compare(o, facts, noise)) is not None and min(c) >= 0 and max(c) > 0]
    return max(winners, key=lambda o: o.tps[0] if o.tps else 0.0, default=None)


def rank_key(facts: Facts, *, dominated: bool) -> tuple[float, ...]:
    """Sort key of a row, best first: published and not dominated, then the quality verdict, then
    absolute tok/s, then the least memory to serve."""
    quality = -1 if facts.quality is None else min(facts.quality, PASSES)
    return (0 if facts.published and not dominated and quality != FAILS else 1, -quality,
            -(facts.tps[0] if facts.tps else 0.0), facts.memory if facts.memory is not None else float("inf"))


def best_of(facts: Facts, peers: Iterable[Facts], noise: SessionNoise | None = None) -> list[str]:
    """What `facts` is best at among `peers` (each judged with the same noise rule): "fastest",
    "smallest" (least memory to serve)."""
    peers = [p for p in peers if p.artifact_id != facts.artifact_id]
    if not peers:
        return []
    said = []
    if facts.tps is not None and all(p.tps is None or compare_speed(facts.tps, p.tps, noise) >= 0 for p in peers):
        said.append("fastest")
    if facts.memory is not None and all(p.memory is None or _compare_smaller(facts.memory, p.memory) >= 0
                                        for p in peers):
        said.append("smallest")
    return said
