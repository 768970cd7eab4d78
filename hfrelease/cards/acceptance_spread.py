"""What a card prints of a speculative point's per-request pass (`hfrelease.speed.per_request`): the spread of
acceptance over prompts, each acceptance figure's 95 % interval resampled over prompts, and how many prompts'
output tokens at temperature 0 equal no speculation's (losslessness as measured, never assumed).

A point recorded without a per-request pass (before it existed, a higher concurrency, a context sweep) says
so instead of printing a figure.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from hfrelease.cards.measurements import SpeedPoint
from hfrelease.cards.numbers import DASH, NumberRegistry, fixed
from hfrelease.cards.text import Markdown, escape_markdown
from hfrelease.speed.acceptance import request_rates

NOT_KEPT = "n/a (no per-request record)"


def _point_id(p: SpeedPoint) -> str:
    return f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}"


def _where(p: SpeedPoint) -> str:
    return f"{p.workload.id} on {p.artifact_id}, {p.speculative}"


def _interval(p: SpeedPoint, name: str) -> list[float] | None:
    bounds = p.entry.record.extra.get("acceptance_intervals")
    pair = bounds.get(name) if isinstance(bounds, dict) else None
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int | float) for v in pair):
        return [float(v) for v in pair if isinstance(v, int | float)]
    return None


def with_interval(numbers: NumberRegistry, p: SpeedPoint, name: str, value: Markdown, label: str) -> Markdown:
    """`value` followed by its 95 % interval over prompts, when the point has one."""
    pair = _interval(p, name)
    if pair is None:
        return value
    # Each bound registered on its own: the card lint traces every number of a measured block to one entry.
    low, high = (numbers.add(f"{_point_id(p)}.{name}.prompts95.{side}",
                             f"95 % interval over prompts of the {label}, {side} bound, {_where(p)}",
                             fixed(bound, 2), [p.entry])
                 for side, bound in (("low", pair[0]), ("high", pair[1])))
    return Markdown(f"{value} ({low}{DASH}{high})")


def prompt_spread(numbers: NumberRegistry, p: SpeedPoint) -> Markdown:
    """Per-prompt acceptance rates: lowest, median and highest, over how many prompts (each figure registered
    on its own: the card lint traces every number of a measured block to one provenance entry)."""
    requests = p.entry.record.extra.get("requests")
    rates = request_rates([r for r in requests if isinstance(r, dict)]) if isinstance(requests, list) else []
    if not rates:
        return Markdown(NOT_KEPT)
    where, pid = _where(p), _point_id(p)
    low, mid, high = (numbers.add(f"{pid}.prompt_rates.{name}", f"per-prompt acceptance rate, {name}, {where}",
                                  fixed(value, 2), [p.entry])
                      for name, value in (("min", min(rates)), ("median", statistics.median(rates)),
                                          ("max", max(rates))))
    count = numbers.add(f"{pid}.prompt_count", f"prompts sent alone, {where}", str(len(rates)), [p.entry])
    return Markdown(f"{low} / {mid} / {high} ({count} prompts)")


def identical_outputs(numbers: NumberRegistry, p: SpeedPoint) -> Markdown:
    """ "k of n prompts" whose output tokens equal no speculation's at temperature 0, with where the others
    first differ; "not compared" without the measurement."""
    found = p.entry.record.extra.get("identical_outputs")
    if not isinstance(found, dict):
        return Markdown("not compared")
    identical, prompts, first = found.get("identical"), found.get("prompts"), found.get("first_difference")
    where, pid = _where(p), _point_id(p)
    same = numbers.add(f"{pid}.identical_outputs", f"prompts whose output tokens equal no speculation's, {where}",
                       str(identical), [p.entry])
    total = numbers.add(f"{pid}.compared_prompts", f"prompts compared with no speculation's outputs, {where}",
                        str(prompts), [p.entry])
    text = f"{same} of {total} prompts"
    positions = [v for v in first if isinstance(v, int)] if isinstance(first, list) else []
    if positions:
        at = numbers.add(f"{pid}.first_difference", f"first output token that differs, earliest, {where}",
                         str(min(positions)), [p.entry])
        text += f" (others differ from token {at})"
    return Markdown(text)


def identical_share(
    numbers: NumberRegistry, draft_id: str, points: Iterable[SpeedPoint], target: str
) -> tuple[Markdown, list[str]] | None:
    """ "k of n" prompts whose output tokens with a draft equal its target's alone at temperature 0, over its
    batch-1 points on the target (registered), and the workloads compared; None when none was compared."""
    identical = prompts = 0
    workloads: list[str] = []
    entries = []
    for p in points:
        found = p.entry.record.extra.get("identical_outputs")
        same, total = (found.get("identical"), found.get("prompts")) if isinstance(found, dict) else (None, None)
        if isinstance(same, int) and isinstance(total, int):
            identical, prompts = identical + same, prompts + total
            workloads.append(escape_markdown(p.workload.label or p.workload.id))
            entries.append(p.entry)
    if not prompts:
        return None
    label = f"with {draft_id} equal {target}'s alone at temperature 0"
    same_shown = numbers.add(f"draft.{draft_id}.identical_outputs", f"prompts whose output tokens {label}",
                             str(identical), entries)
    total_shown = numbers.add(f"draft.{draft_id}.compared_prompts", f"prompts compared, outputs {label}",
                              str(prompts), entries)
    return Markdown(f"{same_shown} of {total_shown}"), workloads


def outputs_sentence(numbers: NumberRegistry, draft_id: str, points: Iterable[SpeedPoint], target: str) -> Markdown:
    """A draft's losslessness as measured over its batch-1 points on its target at temperature 0."""
    found = identical_share(numbers, draft_id, points, target)
    if found is None:
        return Markdown(
            f"Its outputs have not been compared with {target}'s alone yet (no per-request record of "
            "greedy decoding), so nothing here says they are identical"
        )
    # No digit outside the registered figure: a measured block's every number traces to a record.
    return Markdown(
        f"With greedy decoding its outputs equal {target}'s alone on {found[0]} prompts "
        f"({', '.join(found[1])}; measured, token by token)"
    )
