"""The card's "Changes since <tag>" section: `hfrelease render --since TAG`'s comparison, one artifact's rows.

The comparison itself is `hfrelease.compare`'s (the same rows `hfrelease compare` prints); this module
only picks an artifact's rows (for a draft: those served with it, the previous head against this one),
formats them as the cards format numbers, and registers every number with the records it comes from
(the old side's records named `<tag>:<record>`), so `check --cards` traces them like any other.
"""

from __future__ import annotations

from hfrelease.cards.inputs import RecordEntry, entry_for
from hfrelease.cards.numbers import NumberRegistry
from hfrelease.cards.text import Markdown, escape_markdown
from hfrelease.compare.report import changed_text, format_delta, format_value, metric_label, resampled, what
from hfrelease.compare.rows import ComparedRow, FamilyComparison
from hfrelease.manifest import Artifact

Context = dict[str, object]


def _old_entry(comparison: FamilyComparison, row: ComparedRow) -> RecordEntry:
    entry = entry_for(row.old_record)
    return RecordEntry(name=f"{comparison.old_label}:{entry.name}", record=row.old_record)


def changes_context(comparison: FamilyComparison | None, numbers: NumberRegistry, artifact: Artifact) -> Context | None:
    """The partial's values for `artifact`, or None when the render was not asked for a comparison."""
    if comparison is None:
        return None
    mine = comparison.for_artifact(artifact.id)
    rows = []
    for row in mine.rows:
        number = f"changes.{row.subject}.{row.config}.{row.artifact}.{row.draft or ''}.{row.metric}"
        old, new = _old_entry(comparison, row), entry_for(row.new_record)
        label = f"{what(row)}, {metric_label(row)}"
        # Each figure registered on its own: the lint traces every number of a measured block to one value.
        change = numbers.add(f"{number}.change", f"{label}, change since {comparison.old_label}",
                             format_delta(row, row.delta), [old, new])
        if row.ci_low is not None and row.ci_high is not None:
            low = numbers.add(f"{number}.low", f"{label}, change since {comparison.old_label}, 95 % CI low",
                              format_delta(row, row.ci_low), [old, new])
            high = numbers.add(f"{number}.high", f"{label}, change since {comparison.old_label}, 95 % CI high",
                               format_delta(row, row.ci_high), [old, new])
            kind = resampled(row, short=True)  # what it resamples: items (paired or not), or one session's repeats
            if low == high:  # "+0.0 to +0.0" reads like a bug; say why the interval has no width
                agree = "every pair agrees" if row.method == "paired-bootstrap" else "every resample equal"
                change = Markdown(f"{change} ({agree}, {kind})")
            else:
                change = Markdown(f"{change} ({low} to {high}, {kind})")
        else:
            change = Markdown(f"{change} (no interval)")
        rows.append({
            "what": escape_markdown(what(row)),
            "artifact": escape_markdown(row.artifact),
            "metric": escape_markdown(metric_label(row)),
            "before": numbers.add(f"{number}.old", f"{what(row)}, {metric_label(row)}, {comparison.old_label}",
                                  format_value(row, row.old), [old]),
            "now": numbers.add(f"{number}.new", f"{what(row)}, {metric_label(row)}", format_value(row, row.new),
                               [new]),
            "change": change,
            "verdict": row.verdict,
        })  # fmt: skip
    # Inputs are a property of the two records, shared by a measurement's metrics: listed once per measurement.
    changed: dict[str, str] = {}
    for row in mine.rows:
        changed.setdefault(what(row), changed_text(row))
    only = [f"{what(r)} of {r.artifact} ({'only in ' + (comparison.old_label if r.side == 'old' else 'this release')})"
            for r in mine.one_sided]
    return {
        "since": escape_markdown(comparison.old_label),
        "draft": artifact.kind == "draft",
        "rows": rows,
        "changed": [{"what": escape_markdown(k), "inputs": escape_markdown(v)} for k, v in changed.items()],
        "only": Markdown(escape_markdown("; ".join(only))) if only else None,
    }
