"""Cards rendered `--since` a release, linted without it: one problem that says how to check them, not one per
number (the committed demo cards gave 189 "not in the ledger" lines and 13 "stale card" ones before)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hfrelease.cards.card_text import CardText, read_cards
from hfrelease.cards.inputs import CardInputs, read_inputs
from hfrelease.cards.lint import lint_cards
from hfrelease.manifest import Manifest, load_manifest

Committed = tuple[Manifest, list[CardText], CardInputs]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "model_cards" / "demo"


@pytest.fixture(scope="module")
def committed() -> Committed:
    """The committed cards with the manifest they were rendered from."""
    manifest = load_manifest(DEMO, check_files=False)
    cards, missing = read_cards(manifest)
    assert not missing and len(cards) == len(manifest.artifact)
    return manifest, cards, read_inputs(manifest)


def test_cards_rendered_since_v0_0_linted_without_it_give_one_problem(committed: Committed) -> None:
    """The committed demo cards were rendered `--since v0.0` (README "What a rebuild reproduces"): linted against
    their ledger alone, the one problem names that release and the option that checks them."""
    manifest, cards, inputs = committed
    problems = lint_cards(manifest, cards, inputs=inputs)
    assert len(problems) == 1, problems[:5]
    assert "rendered with `render --since v0.0`" in problems[0] and "check with `--since v0.0`" in problems[0]


def test_cards_without_changes_are_linted_number_by_number(committed: Committed) -> None:
    """A card set with no "Changes since" figures is checked number by number: an edited value is found."""
    manifest, cards, inputs = committed
    card = next(c for c in cards if c.artifact_id == "undertrained")
    assert "changes." not in card.text
    edited = replace(card, text=card.text.replace("= 100.0:", "= 99.0:", 1))
    assert edited.text != card.text
    problems = lint_cards(manifest, [edited], inputs=inputs)
    assert any("99.0" in p and "stale card" in p for p in problems), problems[:5]


def test_check_cards_without_since_hints_the_check_not_a_re_render(committed: Committed) -> None:
    """`check --cards` on the committed cards without --since: the hint names the option and the release to
    check them with (re-rendering would drop the "Changes since" section, not fix anything); with another
    problem beside it, re-rendering is named too."""
    from hfrelease.stages.cards import LintReport, LintSettings, lint_stage

    manifest, _, _ = committed
    report = lint_stage(manifest, LintSettings())
    assert report.rendered_since == "v0.0" and len(report.problems) == 1, report.problems[:5]
    assert report.hint() == ("Check them against the release they were rendered with: "
                             "`hfrelease check --cards --since v0.0`.")
    assert report.as_dict()["rendered_since"] == "v0.0"
    two = LintReport(checked=6, problems=(*report.problems, "README.md: a stale number"), rendered_since="v0.0")
    assert "--since v0.0" in two.hint() and "Re-render with `hfrelease render`" in two.hint()
    plain = LintReport(checked=6, problems=("README.md: a stale number",))
    assert plain.hint().startswith("Re-render with `hfrelease render`")
