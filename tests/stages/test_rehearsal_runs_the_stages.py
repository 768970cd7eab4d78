"""The rehearsal runs the release workflow, whose steps are `hfrelease` commands; each command calls its stage.

So the rehearsal, CI and a maintainer at the terminal run the same stage functions: the workflow's steps
are checked here, and each command's call of its stage in `test_cli_calls_stages.py` and below.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hfrelease.ci.workflows import WorkflowSpec, render_workflows
from hfrelease.errors import ExitCode, UsageError
from hfrelease.manifest import load_manifest
from hfrelease.stages import release
from hfrelease.stages.runner import stage_signals
from tests.conftest import ROOT, CliRun

# Each `hfrelease` command the release workflow runs, and the stage function that command calls.
STAGES = {
    "release --only check": "hfrelease.stages.release.check_step",
    "eval": "hfrelease.stages.eval.run_eval_stage",
    "ledger merge": "hfrelease.ledger.store (merge_ledgers)",
    "release --only gate": "hfrelease.stages.release.gate_step",
    "render": "hfrelease.stages.cards.render_stage",
    "check --cards": "hfrelease.stages.cards.lint_stage",
    "bundle": "hfrelease.stages.publish.bundle_stage",
    "release --only publish": "hfrelease.stages.release.publish_step (publish_stage, then verify_stage)",
}


def _commands(text: str) -> list[str]:
    """The `hfrelease` commands of a workflow's `run:` steps, as `command [--only STEP|--cards]`."""
    found = []
    for job in yaml.safe_load(text)["jobs"].values():
        for step in job.get("steps", []):
            for match in re.finditer(r"\bhfrelease ([a-z]+(?: merge)?)\b([^\n]*)", step.get("run", "")):
                flag = re.search(r"--only (\w+)|(--cards)", match.group(2))
                found.append(match.group(1) + (f" --only {flag.group(1)}" if flag and flag.group(1) else
                                               " --cards" if flag else ""))
    return found


def test_the_release_workflow_runs_only_commands_over_stages() -> None:
    """Every `hfrelease` step of the release workflow is a command known to call its stage function."""
    manifest = load_manifest(ROOT / "tests" / "fixtures" / "family", check_files=False)
    spec = WorkflowSpec(manifest="release.toml", install="git+https://github.com/acme/hfrelease@" + "0" * 40)
    text = render_workflows(manifest, spec)["workflows/release.yml"]
    assert _commands(text) == list(STAGES)


@pytest.mark.parametrize("step", ["check", "gate", "publish"])
def test_release_only_calls_its_step(
    step: str, fixture_family: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRun,
) -> None:
    """`hfrelease release --only STEP` hands its settings to that step's stage function."""
    calls: list[release.StepSettings] = []

    def stage(settings: release.StepSettings, **kwargs: Any) -> Any:
        calls.append(settings)
        raise UsageError("the stage was reached")

    monkeypatch.setattr(release, f"{step}_step", stage)
    code, _, err = cli(["release", str(fixture_family), "--only", step, "--artifact", "fp8", "--tag", "v9"])
    assert code == ExitCode.USAGE and "the stage was reached" in err
    assert [(s.artifacts, s.tag) for s in calls] == [(("fp8",), "v9")]


def test_sigterm_in_a_stage_unwinds_like_ctrl_c() -> None:
    """Inside `stage_signals` SIGTERM raises KeyboardInterrupt (servers stop in `finally`); outside, the
    previous handler is back."""
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), stage_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once: never waited out
    assert signal.getsignal(signal.SIGTERM) is before
