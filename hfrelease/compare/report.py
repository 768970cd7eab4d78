"""The comparison as data (`--json`) and as a Markdown section (`--markdown`, a card's "Changes since")."""

from __future__ import annotations

from typing import Any

from hfrelease.compare.rows import ComparedRow, FamilyComparison, OneSidedRow

# Metrics shown as points (0-100) when their values are fractions, as the cards print gate scores.
_POINTS = ("acceptance_rate",)


def _row_json(row: ComparedRow) -> dict[str, Any]:
    return {
        "kind": row.kind, "subject": row.subject, "config": row.config, "artifact": row.artifact,
        "draft": row.draft, "metric": row.metric, "higher_is_better": row.higher_is_better,
        "old": row.old, "new": row.new, "delta": row.delta, "ci_low": row.ci_low, "ci_high": row.ci_high,
        "confidence": 0.95, "method": row.method, "n_old": row.n_old, "n_new": row.n_new,
        "seeds_old": len(row.old_runs) or 1, "seeds_new": len(row.new_runs) or 1, "verdict": row.verdict,
        "sessions_old": row.sessions_old, "sessions_new": row.sessions_new,
        "changed": [{"name": c.name, "old": c.old, "new": c.new} for c in row.changed],
    }  # fmt: skip


def _one_sided_json(row: OneSidedRow) -> dict[str, Any]:
    return {"side": row.side, "kind": row.kind, "subject": row.subject, "config": row.config,
            "artifact": row.artifact, "draft": row.draft}


def comparison_json(comparison: FamilyComparison) -> dict[str, Any]:
    """Every compared row and every one-sided row, numbers unrounded."""
    return {
        "family": comparison.family,
        "old": comparison.old_label,
        "new": comparison.new_label,
        "session_noise": comparison.noise.as_dict() if comparison.noise else None,
        "rows": [_row_json(r) for r in comparison.rows],
        "only_old": [_one_sided_json(r) for r in comparison.one_sided if r.side == "old"],
        "only_new": [_one_sided_json(r) for r in comparison.one_sided if r.side == "new"],
    }


def _is_fraction_metric(row: ComparedRow) -> bool:
    return row.kind == "gate" or any(word in row.metric for word in _POINTS)


def format_value(row: ComparedRow, value: float) -> str:
    """A value in the unit cards use: points for fractions (gate scores, acceptance), else 2 decimals."""
    return f"{100 * value:.1f}" if _is_fraction_metric(row) else f"{value:.2f}"


def format_delta(row: ComparedRow, value: float) -> str:
    return f"{100 * value:+.1f}" if _is_fraction_metric(row) else f"{value:+.2f}"


def resampled(row: ComparedRow, *, short: bool = False) -> str:
    """What a row's interval resamples, as every interval printed says: a gate's items (paired when both sides
    scored the same ones), a speed row's repeats, each side's from one server session (a record's repeats ran
    back to back on one server, so the interval holds no term for what varies between sessions). `short`: the
    words a card's narrow Changes table uses, its intro spelling them out."""
    if row.method == "session-noise":  # `hfrelease.speed.noise`: A/A sessions pooled, the repeats' interval inside
        return "sessions" if short else "between sessions, A/A noise"
    if row.kind == "speed":
        return "repeats" if short else "repeats of one session"  # each side's resampled on its own
    if row.method == "paired-bootstrap":
        return "paired items" if short else "paired over items"
    return "items" if short else "unpaired over items"


def format_interval(row: ComparedRow) -> str:
    if row.ci_low is None or row.ci_high is None:
        # A speed record of one repeat has nothing to resample: say so rather than a range of one value.
        return "no interval (n = 1)" if row.kind == "speed" and 1 in (row.n_old, row.n_new) else "no interval"
    return f"{format_delta(row, row.ci_low)} to {format_delta(row, row.ci_high)} ({resampled(row)})"


def noise_line(comparison: FamilyComparison) -> str:
    """What the comparison's session noise was measured from (`hfrelease.speed.noise`)."""
    assert comparison.noise is not None
    return f"Between sessions: {comparison.noise.describe()}."


def metric_label(row: ComparedRow) -> str:
    unit = " (points)" if _is_fraction_metric(row) else ""
    names = {"output_throughput": "output tok/s", "spec_acceptance_rate": "acceptance rate",
             "spec_mean_acceptance_length": "acceptance length"}
    return names.get(row.metric, row.metric) + unit


def what(row: ComparedRow | OneSidedRow) -> str:
    """What a row measures, in one cell: gate or workload, mode or config, and the draft when one served."""
    # The draft is named unless the config already is (the demo's `eagle3` config serves the `eagle3` head): the
    # repeated name made the changes table wider than the card column.
    served = (f" with {row.draft}" if row.draft and row.draft not in (row.artifact, row.config.split(" ")[0])
              else "")
    return f"{row.subject} ({row.config}){served}"


def changed_text(row: ComparedRow) -> str:
    return "; ".join(f"{c.name} {c.old} → {c.new}" for c in row.changed) or "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def comparison_markdown(comparison: FamilyComparison, *, heading: str | None = None, level: int = 2) -> str:
    """A Markdown section: one table of compared rows, then what changed and what is on one side only."""
    title = heading or f"Changes since {comparison.old_label}"
    lines = [f"{'#' * level} {title}", ""]
    if comparison.rows:
        lines += [
            f"Each row compares {comparison.old_label} with {comparison.new_label} on the same measurement; "
            "the interval is 95 %: a gate's by a bootstrap over its items (paired when both sides scored the same "
            "items), a speed row's over each side's repeats and, for output tok/s, what varies between server "
            "sessions, measured from the same measurement recorded in several sessions on the same host (\"between "
            "sessions\"; without such a measurement, \"session noise unmeasured\"); \"within noise\" means it "
            "includes no change, and a row whose inputs did not change is \"within session noise\".",
            "",
            *([noise_line(comparison), ""] if comparison.noise else []),
            "| measurement | artifact | metric | before | now | change | 95 % interval | verdict |",
            "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
        ]
        for row in comparison.rows:
            cells = [what(row), row.artifact, metric_label(row), format_value(row, row.old),
                     format_value(row, row.new), format_delta(row, row.delta), format_interval(row), row.verdict]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        changed = [r for r in comparison.rows if r.changed]
        if changed:
            lines += ["", "Inputs that changed:", ""]
            seen: set[str] = set()
            for row in changed:
                item = f"- {what(row)}, {row.artifact}: {changed_text(row)}"
                if item not in seen:
                    seen.add(item)
                    lines.append(_cell(item).replace("\\|", "|"))
    else:
        lines.append(f"No measurement of {comparison.new_label} was also made in {comparison.old_label}.")
    for side, label in (("old", comparison.old_label), ("new", comparison.new_label)):
        only = [r for r in comparison.one_sided if r.side == side]
        if only:
            lines += ["", f"Only in {label}: " + ", ".join(f"{what(r)} of {r.artifact}" for r in only) + "."]
    return "\n".join(lines) + "\n"
