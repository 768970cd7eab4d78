"""Hand-written text is held to the card's own verdicts (issue 25, part 2), and a corpus of planted bad cards
(tests/fixtures/bad_cards/, one per rule) each fails the card lint while the committed demo cards pass."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hfrelease.cards import CardInputs, render_family
from hfrelease.cards.card_text import CardText, read_cards
from hfrelease.cards.lint import lint_cards
from hfrelease.cards.lint.claims import claims, failing_gates, hand_text
from hfrelease.manifest import load_manifest
from tests.conftest import ROOT

DEMO = ROOT / "model_cards" / "demo"
BAD = ROOT / "tests" / "fixtures" / "bad_cards"


def _lint_demo(family: Path) -> list[str]:
    manifest = load_manifest(family / "release.toml", check_files=False)
    cards, problems = read_cards(manifest, family)
    return problems + lint_cards(manifest, cards)


def test_the_committed_demo_cards_pass() -> None:
    assert _lint_demo(DEMO) == []


@pytest.mark.parametrize("fixture", sorted(BAD.glob("*.toml")), ids=lambda p: p.stem)
def test_each_planted_bad_card_fails_the_lint(fixture: Path, tmp_path: Path) -> None:
    """The defect planted into one committed card is reported, on that card."""
    plant = tomllib.loads(fixture.read_text(encoding="utf-8"))
    family = tmp_path / "demo"
    family.mkdir()
    (family / "release.toml").write_bytes((DEMO / "release.toml").read_bytes())
    for card in DEMO.glob("*/README.md"):
        (family / card.parent.name).mkdir()
        (family / card.parent.name / "README.md").write_bytes(card.read_bytes())
    for plots in DEMO.glob("*/plots"):
        (family / plots.parent.name / "plots").symlink_to(plots)
    path = family / plant["card"] / "README.md"
    text = path.read_text(encoding="utf-8")
    if "old" in plant:
        assert plant["old"] in text, f"{fixture.name}: the text to replace is not in the committed card"
        text = text.replace(plant["old"], plant["new"], 1)
    else:
        assert plant["after"] in text, f"{fixture.name}: the anchor is not in the committed card"
        text = text.replace(plant["after"], plant["after"] + plant["text"], 1)
    path.write_text(text, encoding="utf-8")
    problems = _lint_demo(family)
    assert any(plant["expect"] in p for p in problems), problems
    assert all(p.startswith(str(path)) for p in problems), problems


def test_a_claim_is_judged_against_the_gates_of_its_own_card(nanbeige: CardInputs) -> None:
    """The flagship FP8 card's hand summary ("no measurable quality loss ... the recommended serving
    artifact") beside a BBH gate its tables say fails is reported; the card without the failing gate is not."""
    card = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).cards[0]
    body = card.readme.split("\n---\n", 1)[1]
    assert "BBH" in failing_gates(body)
    assert any("no measurable quality loss" in p for p in hand_text(body))
    text = CardText(artifact_id="fp8-dynamic", path=Path("fp8-dynamic/README.md"), text=card.readme)
    found = claims(nanbeige.manifest, text, body)
    assert any("claims 'no measurable quality loss'" in p and "fails BBH" in p for p in found), found
    assert any("claims 'is the recommended'" in p for p in found), found
    # The same text on a card whose gates pass is not a problem.
    passing = body.replace("| **fail** |", "| pass |")
    assert failing_gates(passing) == []
    assert claims(nanbeige.manifest, text, passing) == []


def test_generated_text_is_not_hand_text() -> None:
    """The matrix's generated "is recommended" and "**recommended**" are the render's, not a hand claim."""
    body = (DEMO / "draft" / "README.md").read_text(encoding="utf-8")
    assert "is recommended" in body
    assert not any("is recommended" in passage for passage in hand_text(body))
