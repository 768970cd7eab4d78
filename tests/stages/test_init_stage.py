"""`hfrelease init`'s stage: what it writes, the set-up steps with --github, and its view."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.ci.scaffold import FamilySpec
from hfrelease.ci.workflows import PREREQUISITES, WorkflowSpec, repository_settings
from hfrelease.errors import UsageError
from hfrelease.stages.init import InitReport, InitSettings, init_stage, init_view
from hfrelease.stages.view import Line
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

FAMILY = FamilySpec(name="tiny-1b", base_model="org/tiny-1b", owner="me")


def _text(report: InitReport) -> list[str]:
    return ["".join(p if isinstance(p, str) else p.text for p in block.parts)
            for block in init_view(report) if isinstance(block, Line)]


def test_init_without_github_lists_the_files_and_what_next(tmp_path: Path) -> None:
    """Each written file, then the next command; no set-up steps without --github."""
    report = init_stage(InitSettings(directory=tmp_path / "fam", family=FAMILY))
    assert report.setup is None and tmp_path / "fam" / "release.toml" in report.written
    text = _text(report)
    assert text[:len(report.written)] == [f"  wrote {path}" for path in report.written]
    assert text[-1] == f"✓ scaffolded {tmp_path / 'fam'}: edit release.toml, then `hfrelease check {tmp_path / 'fam'}`"


def test_init_with_github_numbers_the_set_up_steps(tmp_path: Path) -> None:
    """With --github the repository's set-up steps follow, numbered, for the repos the manifest publishes."""
    (tmp_path / ".git").mkdir()  # the repository root the workflows go to
    spec = WorkflowSpec(manifest="release.toml", install="git+https://example.org/hfrelease@abc")
    report = init_stage(InitSettings(directory=tmp_path / "fam", family=FAMILY, github=spec))
    assert report.setup and tmp_path / ".github" / "workflows" / "release.yml" in report.written
    text = _text(report)
    assert text[-len(report.setup) - 1].startswith("Before the first release tag")
    assert text[-len(report.setup):] == [f"  {n}. {step}" for n, step in enumerate(report.setup, start=1)]
    assert report.setup == tuple(repository_settings(spec, repos=[]))  # the scaffold publishes no artifact yet


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    """A second init of the same directory is a usage error unless forced."""
    init_stage(InitSettings(directory=tmp_path / "fam", family=FAMILY))
    with pytest.raises(UsageError):
        init_stage(InitSettings(directory=tmp_path / "fam", family=FAMILY))
    assert init_stage(InitSettings(directory=tmp_path / "fam", family=FAMILY, force=True)).written


def test_workflow_options_without_github_exit_2(tmp_path: Path, cli: CliRun) -> None:
    """--runner-label or --environment given without --github is refused, nothing written."""
    code, _, err = cli(["init", str(tmp_path / "fam"), "--name", "x-1b", "--base-model", "o/x", "--owner", "me",
                        "--runner-label", "a100", "--environment", "prod"])
    assert code == 2 and "--runner-label and --environment only apply with --github" in err
    assert not (tmp_path / "fam").exists()


def test_init_with_github_states_what_nothing_can_check(tmp_path: Path) -> None:
    """With --github, the prerequisites (attestations, setup-python's OS, the CUDA 13 driver, the eval jobs'
    read token, GitHub's three-tag limit, fork pull requests on the GPU runners) are printed, each once."""
    (tmp_path / ".git").mkdir()
    spec = WorkflowSpec(manifest="release.toml", install="git+https://example.org/hfrelease@abc")
    report = init_stage(InitSettings(directory=tmp_path / "fam", family=FAMILY, github=spec))
    assert report.prerequisites == PREREQUISITES
    text = "\n".join(_text(report))
    needles = ("public repository, or GitHub Enterprise Cloud", "setup-python needs", "a driver for CUDA 13",
               "HF_READ_TOKEN secret", "more than three tags at once", "fork's pull request")
    for needle in needles:
        assert text.count(needle) == 1, needle
    assert not init_stage(InitSettings(directory=tmp_path / "b", family=FAMILY)).prerequisites
