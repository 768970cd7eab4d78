"""`hfrelease check` holds a family's own workflows (`.github/workflows/*.yml`, not only the generated
release.yml) to the release workflow's isolation rule, and notes what the tag-push release needs that it
cannot check (issue 28, part 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hfrelease.ci.workflows import PREREQUISITES
from hfrelease.errors import ExitCode
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

# A benchmark workflow of the family's own: fork pull requests reach the GPU pool, a write token sits beside
# vLLM, a secret in the workflow's env reaches every job, and the publish job is handed the read token.
OWN = """\
on:
  pull_request_target:
  push:
    tags: ["v*"]
env:
  UPLOAD: ${{ secrets.UPLOAD_KEY }}
jobs:
  bench:
    runs-on: [self-hosted, gpu]
    steps:
      - env:
          HF_TOKEN: ${{ secrets.HF_TOKEN }}
        run: hfrelease eval model_cards/x/release.toml
  ship:
    runs-on: ubuntu-latest
    environment: release
    steps:
      - env:
          HF_READ_TOKEN: ${{ secrets.HF_READ_TOKEN }}
        run: hfrelease publish model_cards/x/release.toml --from-bundle b
"""


def _workflow(root: Path, name: str, text: str) -> None:
    (root / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
    (root / ".github" / "workflows" / name).write_text(text)


def test_check_refuses_a_family_workflow_that_breaks_the_isolation_rule(fixture_family: Path, cli: CliRun) -> None:
    """Every breach of the family's own workflow is a problem at its file and job, all at once, exit 3."""
    _workflow(fixture_family, "bench.yml", OWN)
    code, out, err = cli(["check", "--offline", "--json", str(fixture_family)])
    assert code == ExitCode.CONFIG, err
    problems = [(p["location"], p["message"]) for p in json.loads(out)["problems"]]
    mine = [(where, what) for where, what in problems if where.startswith(".github/workflows/bench.yml")]
    assert {where for where, _ in mine} == {".github/workflows/bench.yml jobs.(workflow env)",
                                           ".github/workflows/bench.yml jobs.bench",
                                           ".github/workflows/bench.yml jobs.ship"}
    text = " ".join(what for _, what in mine)
    assert "secrets.UPLOAD_KEY in the workflow's env reaches every job" in text
    assert "self-hosted runner on pull_request_target" in text
    assert "reads a secret (HF_TOKEN)" in text and "runs 'hfrelease eval'" in text
    assert "publishes and reads HF_READ_TOKEN" in text


def test_check_passes_the_generated_workflow_and_notes_the_prerequisites(
    fixture_family: Path, cli: CliRun
) -> None:
    """The workflows `init --github` renders (copied from this repository) keep the rule; with a release.yml
    there, check notes each prerequisite nothing can check."""
    root = Path(__file__).resolve().parents[2]
    (fixture_family / ".github").mkdir()
    shutil.copytree(root / ".github" / "workflows", fixture_family / ".github" / "workflows")
    _, out, err = cli(["check", "--offline", "--json", str(fixture_family)])  # its install line is the repo's own
    report = json.loads(out)
    assert not [p for p in report.get("problems", []) if "isolation rule" in p["message"]], err
    notes = report["preflight"]["notes"]
    assert [n for n in notes if n.startswith("the release workflow needs")] == [
        f"the release workflow needs (not checked): {item}" for item in PREREQUISITES]


def test_a_family_serving_suffix_decoding_is_told_its_runners_need_arctic_inference(
    fixture_family: Path, cli: CliRun
) -> None:
    """With a suffix config and a release.yml, check adds the runners' arctic-inference to the notes (the locks
    install no such package); the same family without one does not."""
    import tomllib

    import tomli_w

    from hfrelease.ci.workflows import SUFFIX_RUNNERS

    root = Path(__file__).resolve().parents[2]
    (fixture_family / ".github").mkdir()
    shutil.copytree(root / ".github" / "workflows", fixture_family / ".github" / "workflows")
    _, out, _ = cli(["check", "--offline", "--json", str(fixture_family)])
    assert f"the release workflow needs (not checked): {SUFFIX_RUNNERS}" not in json.loads(out)["preflight"]["notes"]
    manifest = fixture_family / "release.toml"
    data = tomllib.loads(manifest.read_text())
    data["speculative"].append({"id": "suffix", "method": "suffix", "num_speculative_tokens": 8})
    manifest.write_text(tomli_w.dumps(data))
    _, out, err = cli(["check", "--offline", "--json", str(fixture_family)])
    notes = json.loads(out)["preflight"]["notes"]
    assert notes[-1] == f"the release workflow needs (not checked): {SUFFIX_RUNNERS}", err
