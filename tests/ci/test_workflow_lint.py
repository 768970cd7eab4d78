"""The workflows lint clean with zizmor and actionlint: the repository's own and what `init --github` writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hfrelease.cli import main
from tests.ci.flagship import ROOT

# hfrelease is not on PyPI: a new family's workflows install it from a pinned commit.
INSTALL = "git+https://github.com/acme/hfrelease@0123456789abcdef0123456789abcdef01234567"


def _lint(argv: list[str], cwd: Path) -> None:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"


def _zizmor(zizmor: str, cwd: Path) -> None:
    # --offline: the audits that ask GitHub's API (e.g. known-vulnerable-actions) cannot run here;
    # --pedantic: the strictest persona short of "auditor", whose only finding is the self-hosted runners.
    _lint([zizmor, "--offline", "--pedantic", "--no-progress", ".github"], cwd)


@pytest.fixture
def initialised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A new repository scaffolded by `hfrelease init --github` with a chosen runner label and environment."""
    (tmp_path / ".git").mkdir()  # the repository root the workflows go to
    with pytest.raises(SystemExit) as exit_info:
        main(["init", str(tmp_path / "model_cards" / "mymodel"), "--name", "mymodel", "--base-model", "acme/My-7B",
              "--owner", "acme", "--github", "--runner-label", "h100", "--environment", "hf-publish",
              "--install", INSTALL])
    assert exit_info.value.code == 0, capsys.readouterr().err
    return tmp_path


def test_repository_workflows_pass_zizmor(zizmor: str) -> None:
    """.github/workflows/*.yml have no zizmor finding."""
    _zizmor(zizmor, ROOT)


def test_repository_workflows_pass_actionlint(actionlint: str) -> None:
    """.github/workflows/*.yml have no actionlint finding (self-hosted labels from .github/actionlint.yaml)."""
    _lint([actionlint], ROOT)


def test_init_github_output_passes_zizmor(initialised: Path, zizmor: str) -> None:
    """The workflows `init --github` writes have no zizmor finding and name the chosen label and environment."""
    release = (initialised / ".github" / "workflows" / "release.yml").read_text()
    assert "runs-on: [self-hosted, h100]" in release
    assert "name: hf-publish" in release
    assert 'MANIFEST: "model_cards/mymodel/release.toml"' in release
    _zizmor(zizmor, initialised)


def test_init_github_output_passes_actionlint(initialised: Path, actionlint: str) -> None:
    """The workflows `init --github` writes have no actionlint finding."""
    _lint([actionlint], initialised)


def test_init_github_refuses_to_overwrite_workflows(initialised: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second `init --github` leaves existing workflows alone (and writes nothing) unless --force."""
    release = initialised / ".github" / "workflows" / "release.yml"
    release.write_text("# mine\n")
    args = ["init", str(initialised / "model_cards" / "other"), "--name", "other", "--base-model", "acme/O-1B",
            "--owner", "acme", "--github", "--install", INSTALL]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2  # a usage mistake, never "a bug" (exit 1)
    assert "already exist" in capsys.readouterr().err
    assert release.read_text() == "# mine\n"
    assert not (initialised / "model_cards" / "other").exists()


def test_runner_label_without_github_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--runner-label and --environment only mean something with --github."""
    with pytest.raises(SystemExit) as exit_info:
        main(["init", str(tmp_path), "--name", "x", "--base-model", "a/b", "--owner", "me", "--runner-label", "h100"])
    assert exit_info.value.code == 2
    assert "--runner-label" in capsys.readouterr().err
