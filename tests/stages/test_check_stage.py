"""The check stage's own rules: which manifests it checks when none is named, and its closing line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode, UsageError
from hfrelease.stages.check import CheckReport, CheckSettings, ManifestCheck, check_stage, valid_view
from hfrelease.stages.view import Line, Styled
from tests.conftest import CliRun

pytestmark = pytest.mark.unit


def test_no_manifest_named_and_none_found_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           cli: CliRun) -> None:
    """In a directory with no release.toml and no model_cards/*/release.toml: exit 2, saying to name one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model_cards" / "empty").mkdir(parents=True)  # a family directory without its manifest
    with pytest.raises(UsageError, match="name a manifest") as info:
        check_stage(CheckSettings(preflight=False))
    assert info.value.exit_code == ExitCode.USAGE
    code, out, err = cli(["check"])
    assert code == ExitCode.USAGE and "error: no release.toml here" in err and out == ""


def test_no_manifest_named_checks_every_family_below(fixture_family: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a name, every model_cards/*/release.toml below the working directory is checked, sorted."""
    root = tmp_path / "repo"
    for name in ("b", "a"):
        shutil.copytree(fixture_family, root / "model_cards" / name)
    monkeypatch.chdir(root)
    report = check_stage(CheckSettings(preflight=False))
    assert [c.path for c in report.checks] == [root / "model_cards" / n / "release.toml" for n in ("a", "b")]


def test_the_closing_line_counts_valid_manifests_and_is_absent_on_a_problem(tmp_path: Path) -> None:
    """'✓ N manifest(s) valid' when all pass (singular for one); nothing when any failed (exit 3)."""
    ok = ManifestCheck(path=tmp_path, result={"ok": True})
    bad = ManifestCheck(path=tmp_path, result={"ok": False})
    assert valid_view(CheckReport(checks=(ok,))) == [Line(parts=(Styled("✓", "green"), " 1 manifest valid"),
                                                          err=True, wrap=True)]
    (closing,) = valid_view(CheckReport(checks=(ok, ok)))
    assert isinstance(closing, Line) and closing.parts[1] == " 2 manifests valid"
    assert valid_view(CheckReport(checks=(ok, bad))) == []


def test_check_cards_says_which_cards_it_linted(fixture_family: Path, monkeypatch: pytest.MonkeyPatch,
                                                cli: CliRun) -> None:
    """`check --cards` names what it linted: how many of the family's cards, which, and the outcome; its
    --json lists them."""
    from hfrelease.stages import cards

    paths = (fixture_family / "ref" / "README.md", fixture_family / "fp8" / "README.md")
    clean = cards.LintReport(checked=2, problems=(), cards=paths)
    monkeypatch.setattr(cards, "lint_stage", lambda manifest, settings, **_: clean)
    code, _, err = cli(["check", "--cards", str(fixture_family)])
    said = " ".join(err.split())
    assert code == 0, err
    assert "cards: linted 2 of 3 cards of" in said
    assert "against its ledger (ref/README.md, fp8/README.md): no problem" in said
    code, out, _ = cli(["check", "--cards", "--json", str(fixture_family)])
    assert json.loads(out)["cards"]["linted"] == [str(p) for p in paths]
    stale = cards.LintReport(checked=1, problems=("a card is stale",), cards=paths[:1])
    monkeypatch.setattr(cards, "lint_stage", lambda manifest, settings, **_: stale)
    code, _, err = cli(["check", "--cards", str(fixture_family)])
    assert code == ExitCode.CONFIG
    assert "linted 1 of 3 cards of" in " ".join(err.split()) and ": 1 problem (above)" in " ".join(err.split())


def _fresh_clone(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo family as a fresh clone has it (its manifest, prompts, sections; no build/demo), as cwd and as
    hfrelease's source checkout."""
    root = tmp_path / "clone"
    shutil.copytree(repo_root / "model_cards" / "demo", root / "model_cards" / "demo",
                    ignore=shutil.ignore_patterns("results*", "cards", "*.png"))
    monkeypatch.setattr("hfrelease.demo.paths.source_root", lambda: root)
    monkeypatch.chdir(root)
    return root


def test_check_without_arguments_notes_an_unbuilt_demo(repo_root: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """In a fresh clone (no build/demo at all), `check` with no arguments says the demo is not built, a note,
    and exits 0; named on the command line, or with a partial build, its missing directories stay errors."""
    root = _fresh_clone(repo_root, tmp_path, monkeypatch)
    report = check_stage(CheckSettings(offline=True))
    assert report.exit_code == ExitCode.OK, [c.errors for c in report.checks]
    (check,) = report.checks
    assert len(check.notes) == 1 and "the demo family is not built here" in check.notes[0], check.notes
    assert "`hfrelease demo build`" in check.notes[0]
    assert check.result["artifacts"][0]["id"] == "reference"

    named = check_stage(CheckSettings(manifests=(root / "model_cards" / "demo",), offline=True))
    assert named.exit_code == ExitCode.CONFIG
    locations = {p["location"] for p in named.checks[0].result["problems"]}
    assert locations >= {"artifact[1].source.path", "gate[0].task_dir"}

    (root / "build" / "demo").mkdir(parents=True)  # a partial build: what is missing is an error
    assert check_stage(CheckSettings(offline=True)).exit_code == ExitCode.CONFIG
