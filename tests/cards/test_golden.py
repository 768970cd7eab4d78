"""Golden-file tests: the demo family's cards, rendered from tests/fixtures/ledger_demo/, byte for byte.

Refresh after an intended change with:  UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/cards -q
(then review the diff of tests/cards/golden/ like any other code change).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hfrelease.cards import CardInputs, render_family

GOLDEN = Path(__file__).resolve().parent / "golden" / "demo"
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))
CARDS = ["reference", "fp8-dynamic", "w8a8-int8", "nvfp4", "undertrained", "draft", "eagle3"]  # every kind of card


@pytest.fixture(scope="module")
def rendered(demo_inputs: CardInputs) -> dict[str, dict[str, bytes]]:
    family = render_family(demo_inputs, plots=False)
    return {card.artifact_id: dict(card.files) for card in family.cards}


@pytest.mark.parametrize("artifact_id", CARDS)
def test_card_matches_golden(rendered: dict[str, dict[str, bytes]], artifact_id: str) -> None:
    """Every text file of the card equals its golden copy (UPDATE_GOLDEN=1 rewrites them). An Every Eval Ever
    record's instance rows (`*_samples.jsonl`, ~70 KB a gate) are pinned by the sha256 its golden record holds,
    not kept as golden copies themselves (tests/cards/test_every_eval_ever.py checks that sha256)."""
    files = {name: content for name, content in rendered[artifact_id].items() if not name.endswith("_samples.jsonl")}
    directory = GOLDEN / artifact_id
    if UPDATE:
        for name, content in files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(content)
    golden = {p.relative_to(directory).as_posix() for p in directory.rglob("*")
              if p.is_file() and not p.name.endswith("_samples.jsonl")}
    assert golden == set(files), "files differ from the golden set: run with UPDATE_GOLDEN=1 if intended"
    for name, content in files.items():
        assert content.decode() == (directory / name).read_text(), f"{artifact_id}/{name} differs from golden"


def test_render_is_deterministic(demo_inputs: CardInputs) -> None:
    """Two renders of the same inputs give identical bytes, plots included."""
    first = render_family(demo_inputs, artifacts=["fp8-dynamic"])
    second = render_family(demo_inputs, artifacts=["fp8-dynamic"])
    assert first.cards[0].files == second.cards[0].files
    assert first.cards[0].files["plots/load.png"].startswith(b"\x89PNG")
