"""What `hfrelease compare` prints for people: the comparison's rows as a table, then what one side lacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfrelease.stages.view import Block, Styled, line, table

if TYPE_CHECKING:
    from hfrelease.compare import FamilyComparison

_VERDICT_STYLE = {"better": "green", "worse": "red"}


def comparison_view(comparison: FamilyComparison) -> list[Block]:
    from hfrelease.compare.report import changed_text, format_delta, format_interval, format_value, metric_label, what

    view: list[Block] = [table(
        f"{comparison.family}: {comparison.old_label} → {comparison.new_label}",
        ("measurement", "artifact", "metric", "before", "now", "change", "95 % interval", "verdict", "inputs changed"),
        [(what(row), row.artifact, metric_label(row), format_value(row, row.old), format_value(row, row.new),
          format_delta(row, row.delta), format_interval(row),
          Styled(row.verdict, _VERDICT_STYLE[row.verdict]) if row.verdict in _VERDICT_STYLE else row.verdict,
          changed_text(row)) for row in comparison.rows])]
    if comparison.noise is not None:
        from hfrelease.compare.report import noise_line

        view.append(line(noise_line(comparison), wrap=True))
    for side, label in (("old", comparison.old_label), ("new", comparison.new_label)):
        only = [r for r in comparison.one_sided if r.side == side]
        if only:
            view.append(line(f"only in {label}: " + ", ".join(f"{what(r)} of {r.artifact}" for r in only), wrap=True))
    return view
