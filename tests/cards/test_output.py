"""Writing cards, --diff against the last render, and the CLI (`hfrelease render`, `check --cards`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from card_fixtures import ROOT, nanbeige_inputs

from hfrelease.cards import CardInputs, apply_changes, plan_changes, render_family, unified_diff
from hfrelease.cli import main
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest


def test_rerender_changes_nothing_and_diff_shows_edits(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """A second render of the same inputs changes no file; a changed record shows up in the diff."""
    family = render_family(demo_inputs)
    apply_changes(plan_changes(family, tmp_path))
    assert plan_changes(render_family(demo_inputs), tmp_path) == []
    (tmp_path / "fp8-dynamic" / "plots" / "old.png").write_bytes(b"\x89PNG stale")
    records = tuple(e for e in demo_inputs.records if e.record.kind == "gate")
    fewer = CardInputs(manifest=demo_inputs.manifest, records=records, sections=demo_inputs.sections)
    changes = plan_changes(render_family(fewer), tmp_path)
    text = unified_diff(changes, tmp_path)
    assert "+Speed: not measured." in text and "--- a/fp8-dynamic/README.md" in text
    assert any(c.status == "removed" and c.path.name == "old.png" for c in changes)
    assert any(c.status == "removed" and c.path.name == "load.png" for c in changes)


@pytest.fixture
def nanbeige_dir(tmp_path: Path, nanbeige_manifest: Manifest) -> Path:
    """A copy of the Nanbeige family directory with a synthetic ledger in results/."""
    target = tmp_path / "nanbeige4.2-3b"
    shutil.copytree(ROOT / "model_cards" / "nanbeige4.2-3b", target)
    ledger = Ledger(target / "results")
    for entry in nanbeige_inputs(nanbeige_manifest).records:
        ledger.write(entry.record)
    return target


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the `hfrelease` entry point; its exit code and output (stdout, then stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    code = exit_info.value.code
    captured = capsys.readouterr()
    return code if isinstance(code, int) else 0, captured.out + captured.err


def test_cli_render_then_check_cards(nanbeige_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`hfrelease render` writes five cards; `hfrelease check --cards` finds in them exactly what is wrong with
    them: in this synthetic ledger the FP8 quant fails BBH, and the flagship's hand-written FP8 summary (the
    seed's words) claims no measurable loss and recommends it (issue 25); --diff then shows nothing."""
    assert run(["render", str(nanbeige_dir)], capsys)[0] == 0
    for artifact in ("bf16", "fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16", "eagle3"):
        assert (nanbeige_dir / artifact / "README.md").is_file()
        assert (nanbeige_dir / artifact / "CITATION.cff").is_file()
        assert (nanbeige_dir / artifact / "citation.bib").is_file()
    assert (nanbeige_dir / "fp8-dynamic" / "plots" / "load.png").is_file()
    assert (nanbeige_dir / "eagle3" / "plots" / "acceptance.png").is_file()
    code, output = run(["check", "--cards", "--json", str(nanbeige_dir)], capsys)
    problems = json.loads(output[:output.rindex("}") + 1])["cards"]["problems"]
    assert code == 3 and len(problems) == 2, output
    assert all("fp8-dynamic/README.md: hand-written text claims" in p and "fails BBH" in p for p in problems)
    assert {"'no measurable quality loss'", "'is the recommended'"} == {p.split(" claims ")[1].split(" (")[0]
                                                                       for p in problems}
    code, output = run(["render", "--diff", str(nanbeige_dir)], capsys)
    assert code == 0 and "+++" not in output and "0 files would change" in output


def test_cli_check_cards_fails_on_edited_card(nanbeige_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edited card makes `check --cards` exit 3."""
    assert run(["render", "--no-plots", str(nanbeige_dir)], capsys)[0] == 0
    card = nanbeige_dir / "nvfp4a16" / "README.md"
    card.write_text(card.read_text().replace("## Limitations\n", "## Limitations\n\nTBD\n"))
    assert run(["check", "--cards", str(nanbeige_dir)], capsys)[0] == 3


def test_cli_render_missing_measurement_exits_6(nanbeige_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gate record missing from the ledger stops `hfrelease render` with exit code 6, naming it."""
    for path in (nanbeige_dir / "results" / "nvfp4a16").glob("gate-bbh-*.json"):
        path.unlink()
    code, output = run(["render", str(nanbeige_dir)], capsys)
    assert code == 6 and "gate 'bbh' on artifact 'nvfp4a16'" in output
    manifest = load_manifest(nanbeige_dir, check_files=False)
    assert not (manifest.root / "nvfp4a16" / "README.md").exists()
