"""`render --since`: each card's "Changes since" section, its numbers traced by the lint."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from card_fixtures import LEDGER_DEMO

from hfrelease.cards import CardInputs, lint_cards, render_family
from hfrelease.cards.card_text import CardText
from hfrelease.compare import compare_family
from hfrelease.compare.report import format_value


def test_draft_card_shows_the_previous_head_and_lints_clean(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """The draft's section holds only rows served with it, its numbers from the two ledgers, and lints clean."""
    comparison = compare_family(str(LEDGER_DEMO), str(LEDGER_DEMO), manifest=None)
    inputs = dataclasses.replace(demo_inputs, changes=dataclasses.replace(comparison, old_label="v0.1"))
    rendered = render_family(inputs, plots=False)
    draft = rendered.card("draft").readme
    section = draft.split("## Changes since v0.1", 1)[1].split("\n## ", 1)[0]
    assert "the previous head, the draft released in v0.1" in section
    rows = comparison.for_artifact("draft").rows
    assert rows and all(r.draft == "draft" for r in rows)
    for row in rows:
        assert f"| {format_value(row, row.old)} | {format_value(row, row.new)} |" in section
    # Every interval names what it resamples (issue 24): a speed row's repeats, or its server sessions where the
    # host's session noise was measured.
    intervals = re.findall(r"\(([^()]* to [^()]*)\) \|", section)
    assert intervals and all(i.endswith((", repeats", ", sessions")) for i in intervals), intervals
    assert "eagle3-untrained" not in section
    assert not re.search(r"[^\n]\n##+ ", draft), "every section heading follows a blank line"
    assert "## Changes since v0.1" in rendered.card("fp8-dynamic").readme
    cards = [CardText(artifact_id=c.artifact_id, path=tmp_path / c.artifact_id / "README.md", text=c.readme)
             for c in rendered.cards]
    problems = lint_cards(inputs.manifest, cards, inputs=inputs)
    assert not [p for p in problems if "Changes" in p or "changes." in p or "v0.1:" in p], problems
    # Linted without the comparison, the figures cannot be re-derived: one problem says to check with it.
    without = lint_cards(inputs.manifest, cards, inputs=demo_inputs)
    assert [p for p in without if "--since" in p] == [p for p in without if "render --since v0.1" in p] != []
    assert not any("is not derived from the current ledger" in p for p in without), without[:5]
