"""`hfrelease ledger merge`: its `--json` is the merge report's `as_dict()`, its text the stage's view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfrelease.ledger.store import MergeReport, SkippedFile
from hfrelease.stages.ledger_view import merge_view
from hfrelease.stages.view import Line, Styled
from tests.conftest import CliRun

pytestmark = pytest.mark.unit


def _broken_source(tmp_path: Path) -> Path:
    source = tmp_path / "job"
    (source / "fp8").mkdir(parents=True)
    (source / "fp8" / "gate-x-000000000000-000000000000.json").write_text("{oops")
    return source


def test_merge_json_is_the_reports_dict(tmp_path: Path, cli: CliRun) -> None:
    """`--json` prints the report's dict: every list present, each refused file with its reason."""
    source = _broken_source(tmp_path)
    code, out, _ = cli(["ledger", "merge", str(source), "--into", str(tmp_path / "main"), "--json"])
    data = json.loads(out)
    assert code == 0 and data["added"] == data["identical"] == []
    broken = source / "fp8" / "gate-x-000000000000-000000000000.json"
    assert [s["path"] for s in data["skipped_invalid"]] == [str(broken)]
    assert data["skipped_invalid"][0]["reason"]


def test_merge_text_counts_and_names_each_refused_file(tmp_path: Path, cli: CliRun) -> None:
    """Without --json: the counts on stderr, then each refused file; stdout stays empty."""
    source = _broken_source(tmp_path)
    code, out, err = cli(["ledger", "merge", str(source), "--into", str(tmp_path / "main")])
    assert code == 0 and out == ""
    assert f"merged into {tmp_path / 'main'}: 0 added, 0 already there, 1 invalid skipped" in err.replace("\n", "")
    assert "\n  skipped " in err and "gate-x-000000000000-000000000000.json" in err.replace("\n", "")


def test_merge_view_keeps_markup_in_paths_as_text() -> None:
    """A path or reason holding Rich markup is text in the view, never a style."""
    report = MergeReport(added=(Path("a/[bold]x.json"),), identical=(),
                         skipped_invalid=(SkippedFile(path=Path("[red]p.json"), reason="bad [/] json"),))
    view = merge_view(report, Path("main"))
    assert isinstance(view[1], Line)
    assert view[1].parts == ("  ", Styled("skipped", "yellow"), " [red]p.json: bad [/] json")
    assert report.as_dict() == {"added": ["a/[bold]x.json"], "identical": [],
                                "skipped_invalid": [{"path": "[red]p.json", "reason": "bad [/] json"}]}


def test_merge_of_a_flat_single_artifact_download_counts_its_records(tmp_path: Path, cli: CliRun) -> None:
    """`hfrelease ledger merge ledgers/*` on one matrix entry's download (extracted flat by download-artifact
    >= v5) adds its record; records nested too deep exit 2 naming them, never "0 added" with exit 0."""
    from hfrelease.errors import ExitCode
    from hfrelease.ledger.store import Ledger
    from tests.ledger.test_ledger_store import make_record

    written = Ledger(tmp_path / "ledgers").write(make_record())
    code, _, err = cli(["ledger", "merge", str(written.parent), "--into", str(tmp_path / "main")])
    assert code == 0 and "1 added" in err
    assert (tmp_path / "main" / written.relative_to(tmp_path / "ledgers")).read_bytes() == written.read_bytes()
    code, _, err = cli(["ledger", "merge", str(tmp_path), "--into", str(tmp_path / "other")])
    assert code == ExitCode.USAGE and "none where a ledger keeps its records" in err
