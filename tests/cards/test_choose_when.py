"""The choice table's "Choose when" cell of a draft, from which workloads it wins on its target: short enough
for the Hub's column whatever the workloads' labels."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hfrelease.cards.choose_table import ChooseTable
from hfrelease.manifest import Manifest, load_manifest
from tests.conftest import ROOT

DEMO = load_manifest(ROOT / "model_cards" / "demo", check_files=False)


def _cell(manifest: Manifest, winners: dict[str, str | None]) -> str:
    """The draft's cell when each workload's best config on the reference is `winners[workload]` (its draft
    artifact id, or None for a config without a draft; a workload left out has no best)."""
    view = SimpleNamespace(manifest=manifest, measured=None, numbers=None, sections={})
    # A winner written "draft?" is the fastest config but not a clear win (`BestVerdict.clear` false).
    best = {w: SimpleNamespace(point=SimpleNamespace(entry=SimpleNamespace(record=SimpleNamespace(
        draft_artifact_id=d.rstrip("?") if d else None))), clear=not (d or "").endswith("?"))
            for w, d in winners.items()}
    speed = SimpleNamespace(verdict=lambda artifact_id, workload_id: best.get(workload_id))
    drafts = SimpleNamespace(draft_gates=lambda artifact: None)
    table = ChooseTable(view, None, speed, drafts)  # type: ignore[arg-type]
    draft = next(a for a in manifest.artifact if a.id == "draft")
    return str(table._draft_when(draft))


@pytest.mark.parametrize(("winners", "cell"), [
    # Every measured workload won: one short phrase (the labels spelled out made the demo's table 104
    # characters wide, over the Hub's 100-character column).
    ({"chat": "draft", "longdoc": "draft", "context": "draft"}, "every workload measured"),
    # A workload without a best (no point without speculation to compare with) is not counted.
    ({"chat": "draft", "longdoc": "draft"}, "every workload measured"),
    # Some won: counted (two labels made the demo's table 103 characters wide).
    ({"chat": "draft", "longdoc": None, "context": "draft"}, "two of three workloads"),
    # One workload won is named, not counted.
    ({"chat": "draft"}, "Short chat"),
    ({"chat": None, "longdoc": "eagle3-untrained"}, "no workload yet: slower"),
    # Issue 24: a fastest config that is not a clear win (it loses at a sweep point, or its repeats overlap the
    # runner-up's) is never counted as a win: the cell says so instead of naming the workload.
    ({"chat": None, "context": "draft?"}, "no clear win yet"),
    ({"chat": "draft", "longdoc": None, "context": "draft?"}, "Short chat"),
])
def test_a_drafts_choose_when_names_or_counts_its_wins(winners: dict[str, str | None], cell: str) -> None:
    """A draft winning several workloads on its target counts them (all, or 'two of three'); one win is named."""
    assert _cell(DEMO, winners) == cell
