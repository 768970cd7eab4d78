"""Each command hands its options to its stage function and prints that stage's report: nothing else runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import ExitCode
from hfrelease.evaluation.runner import EvalReport
from hfrelease.stages import cards, eval
from hfrelease.stages.runner import exit_status, worst
from tests.conftest import CliRun


def test_eval_hands_its_options_to_the_eval_stage(
    fixture_family: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRun, tmp_path: Path,
) -> None:
    """`hfrelease eval --json` prints the eval stage's report as is and exits by the exit policy."""
    seen: list[eval.EvalSettings] = []
    report = eval.EvalStageReport(gates=EvalReport(rows=(), servers_started=0, requests_sent=0, run_dir=tmp_path))

    def stage(settings: eval.EvalSettings, **kwargs: Any) -> eval.EvalStageReport:
        seen.append(settings)
        return report

    monkeypatch.setattr(eval, "run_eval_stage", stage)
    code, out, _ = cli(["eval", str(fixture_family), "--artifact", "fp8", "--force", "--json"])
    assert seen == [eval.EvalSettings(manifest=fixture_family, artifacts=("fp8",), force=True)]
    assert json.loads(out) == report.as_dict() and code == exit_status(report) == ExitCode.OK


def test_render_and_check_cards_hand_their_options_to_the_card_stages(
    fixture_family: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRun,
) -> None:
    """`render` calls `render_stage`, `check --cards` calls `lint_stage`; their JSON is the stages' reports'."""
    rendered = cards.RenderReport(family_root=fixture_family, cards=2, changes=(), written=True)
    linted = cards.LintReport(checked=2, problems=("a card is stale",))
    calls: list[object] = []
    monkeypatch.setattr(cards, "render_stage", lambda settings, **_: calls.append(settings) or rendered)
    monkeypatch.setattr(cards, "lint_stage", lambda manifest, settings, **_: calls.append(settings) or linted)
    code, out, _ = cli(["render", str(fixture_family), "--no-plots", "--json"])
    assert code == 0 and json.loads(out) == rendered.as_dict()["changes"]
    code, out, _ = cli(["check", "--cards", str(fixture_family), "--max-age-days", "9", "--json"])
    assert code == ExitCode.CONFIG == exit_status(linted) and json.loads(out)["cards"] == linted.as_dict()
    assert calls == [cards.RenderSettings(manifest=fixture_family, plots=False),
                     cards.LintSettings(max_age_days=9)]


def test_exit_policy_is_the_most_serious_code() -> None:
    """Several measurements together exit with the worst: server died > void > gate failed > ok."""
    assert worst(ExitCode.OK, ExitCode.GATE_FAILED) == ExitCode.GATE_FAILED
    assert worst(ExitCode.GATE_FAILED, ExitCode.SERVER_FAILED, ExitCode.MEASUREMENT_FAILED) == ExitCode.SERVER_FAILED
