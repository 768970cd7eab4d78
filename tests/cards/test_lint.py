"""Card lint: clean renders pass; planted placeholders, numbers, dangling links and disagreements are caught."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from hfrelease.cards import CardInputs, CardLintError, check_cards, lint_cards, read_cards, render_family
from hfrelease.cards.card_text import CardText
from hfrelease.cards.write import apply_changes, plan_changes


@pytest.fixture(scope="module")
def cards(demo_inputs: CardInputs, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[CardText]]:
    root = tmp_path_factory.mktemp("demo")
    apply_changes(plan_changes(render_family(demo_inputs), root))
    found, problems = read_cards(demo_inputs.manifest, root)
    assert not problems
    return root, found


def _edit(card: CardText, old: str, new: str, count: int = 1) -> CardText:
    assert old in card.text, old
    return CardText(artifact_id=card.artifact_id, path=card.path, text=card.text.replace(old, new, count))


def test_clean_cards_pass(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """Freshly rendered cards have no problem, checked against the ledger."""
    root, found = cards
    assert lint_cards(demo_inputs.manifest, found, inputs=demo_inputs) == []
    published = [a for a in demo_inputs.manifest.artifact]
    assert check_cards(demo_inputs.manifest, inputs=demo_inputs, family_root=root) == len(published)


def test_planted_placeholder(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """TODO, unfilled {{ }} and <this-repo> are caught."""
    _, found = cards
    bad = _edit(found[1], "## Limitations\n", "## Limitations\n\nTODO write this; serve {{ repo }} as <this-repo>\n")
    problems = lint_cards(demo_inputs.manifest, [bad])
    assert sum("placeholder" in p for p in problems) == 3


def _sweep_value(text: str, concurrency: int) -> str:
    """The tok/s the card's concurrency sweep shows at `concurrency` (read from the recorded ledger's card)."""
    match = re.search(rf"^\| {concurrency} \| ([0-9.]+) \(", text, re.M)
    assert match, f"no sweep row for concurrency {concurrency}"
    return match.group(1)


def test_untraced_number(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """A number in a measured block that is not in the provenance table is caught."""
    _, found = cards
    value = _sweep_value(found[1].text, 2)
    bad = _edit(found[1], f"| 2 | {value} (", "| 2 | 999.9 (")
    assert any("999.9" in p and "does not trace" in p for p in lint_cards(demo_inputs.manifest, [bad]))


def test_dangling_cross_link(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """A Hub link to a repo that is not an artifact of the family is caught; a missing plot too."""
    _, found = cards
    bad = _edit(found[1], "## Links & provenance\n",
                "## Links & provenance\n\n- [gone](https://huggingface.co/hfrelease-demo/tiny-INT4)\n")
    bad = _edit(bad, "(plots/load.png)", "(plots/missing.png)")
    problems = lint_cards(demo_inputs.manifest, [bad])
    assert any("tiny-INT4" in p and "dangling" in p for p in problems)
    assert any("plots/missing.png" in p for p in problems)


def test_two_cards_disagree(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """The same measurement showing different values in two cards is caught (even without a ledger)."""
    _, found = cards
    reference, fp8 = found[0], found[1]
    row = "- `gate.arith.fp8-dynamic.value` = "
    value = fp8.text.split(row)[1].split(":")[0].strip()
    bad = _edit(fp8, f"{row}{value}:", f"{row}99.9:")
    problems = lint_cards(demo_inputs.manifest, [reference, bad])
    assert any("gate.arith.fp8-dynamic.value" in p and "same value in every card" in p for p in problems)


def test_stale_value_against_ledger(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """A provenance value the ledger does not give (hand-edited or stale) is caught."""
    _, found = cards
    row = "- `speed.load.fp8-dynamic.none.c2.output_throughput` = "
    value = _sweep_value(found[1].text, 2)
    edited = f"{float(value) + 10:.1f}"
    bad = _edit(found[1], f"{row}{value}:", f"{row}{edited}:")
    bad = _edit(bad, f"| 2 | {value} (", f"| 2 | {edited} (")
    problems = lint_cards(demo_inputs.manifest, [bad], inputs=demo_inputs)
    assert any(f"ledger gives {value}" in p for p in problems)


def test_front_matter_and_age(demo_inputs: CardInputs, cards: tuple[Path, list[CardText]]) -> None:
    """Missing front-matter keys, a missing age line and numbers older than allowed are caught."""
    _, found = cards
    bad = _edit(found[1], "license: apache-2.0\n", "")
    bad = _edit(bad, "measured on", "recorded around", count=-1)  # every mention (the draft's intro has one too)
    problems = lint_cards(demo_inputs.manifest, [bad])
    assert any("lacks 'license'" in p for p in problems)
    assert any("does not say when" in p for p in problems)
    old = lint_cards(demo_inputs.manifest, [found[1]], today=date(2030, 1, 1), max_age_days=90)
    assert any("days old" in p for p in old)


def test_check_cards_raises_with_every_problem(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """check_cards raises one CardLintError listing every card that is missing."""
    with pytest.raises(CardLintError) as info:
        check_cards(demo_inputs.manifest, family_root=tmp_path)
    assert len(info.value.problems) == len(demo_inputs.manifest.artifact)
