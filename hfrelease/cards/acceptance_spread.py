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
    text = f"{fixed(pair[0], 2)}{DASH}{fixed(pair[1], 2)}"
    shown = numbers.add(
        f"{_point_id(p)}.{name}.prompts95", f"95 % interval over prompts of the {label}, {_where(p)}", text, [p.entry]
    )
    return Markdown(f"{value} ({shown})")


def prompt_spread(numbers: NumberRegistry, p: SpeedPoint) -> Markdown:
    """Per-prompt acceptance rates: lowest, median and highest, over how many prompts."""
    requests = p.entry.record.extra.get("requests")
    rates = request_rates([r for r in requests if isinstance(r, dict)]) if isinstance(requests, list) else []
    if not rates:
        return Markdown(NOT_KEPT)
    text = (
        f"{fixed(min(rates), 2)} / {fixed(statistics.median(rates), 2)} / {fixed(max(rates), 2)} ({len(rates)} prompts)"
    )
    return numbers.add(
        f"{_point_id(p)}.prompt_rates", f"per-prompt acceptance min / median / max, {_where(p)}", text, [p.entry]
    )


def identical_outputs(numbers: NumberRegistry, p: SpeedPoint) -> Markdown:
    """ "k of n prompts" whose output tokens equal no speculation's at temperature 0, with where the others
    first differ; "not compared" without the measurement."""
    found = p.entry.record.extra.get("identical_outputs")
    if not isinstance(found, dict):
        return Markdown("not compared")
    identical, prompts, first = found.get("identical"), found.get("prompts"), found.get("first_difference")
    text = f"{identical} of {prompts} prompts"
    if isinstance(first, list) and first:
        text += f" (others differ from token {min(v for v in first if isinstance(v, int))})"
    return numbers.add(
        f"{_point_id(p)}.identical_outputs",
        f"prompts whose output tokens equal no speculation's, {_where(p)}",
        text,
        [p.entry],
    )


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
    shown = numbers.add(
        f"draft.{draft_id}.identical_outputs",
        f"prompts whose output tokens with {draft_id} equal {target}'s alone at temperature 0",
        f"{identical} of {prompts}",
        entries,
    )
    return shown, workloads


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
