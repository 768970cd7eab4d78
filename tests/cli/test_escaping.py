"""Manifest strings are plain text in output, and `init` writes only names safe in YAML and shell."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from hfrelease.stages.view import visible
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

FAMILY = Path(__file__).resolve().parent.parent / "fixtures" / "family"
INSTALL = "git+https://github.com/acme/hfrelease@0123456789abcdef0123456789abcdef01234567"


def family_named(tmp_path: Path, display_name: str) -> Path:
    target = tmp_path / "family"
    shutil.copytree(FAMILY, target)
    data = tomllib.loads((target / "release.toml").read_text())
    data["family"]["display_name"] = display_name
    (target / "release.toml").write_text(tomli_w.dumps(data))
    return target


def test_rich_markup_in_display_name_prints_as_written(tmp_path: Path, cli: CliRun) -> None:
    """`check` prints a display name holding Rich markup literally, brackets and all."""
    family = family_named(tmp_path, "[red]Fixture[/red] [link=https://evil.example]x[/link]")
    code, out, _ = cli(["check", str(family), "--no-preflight"])
    assert code == 0
    assert "[red]Fixture[/red] [link=https://evil.example]x[/link]" in out


def test_ansi_escapes_are_never_printed_raw(tmp_path: Path, cli: CliRun) -> None:
    """An ANSI sequence in a manifest string is shown as its escape, never sent to the terminal."""
    family = family_named(tmp_path, "Fixture \x1b[2J\x1b]0;pwned\x07 end")
    code, out, err = cli(["check", str(family), "--no-preflight"])
    assert code == 0
    assert "\x1b" not in out + err
    assert "\\x1b[2J" in out


def test_visible_keeps_text_and_escapes_controls() -> None:
    """Letters of any script, newlines and tabs stay; ESC, C1 controls and bidi overrides are escaped."""
    assert visible("Pečiukonis\tok\n") == "Pečiukonis\tok\n"
    assert visible("a\x1bb\x9bc\u202ed") == "a\\x1bb\\x9bc\\u202ed"


@pytest.mark.parametrize("name", ["dir${{ github.token }}", "two\nlines", "quo'te", "sp ace", "-dash"])
def test_init_refuses_unsafe_directory_names(
    tmp_path: Path, cli: CliRun, name: str
) -> None:
    """`init --github` refuses a directory name that is not a plain name, and writes nothing."""
    (tmp_path / ".git").mkdir()
    code, _, err = cli(["init", str(tmp_path / "model_cards" / name), "--name", "mymodel", "--base-model",
                        "acme/My-7B", "--owner", "acme", "--github", "--install", INSTALL])
    assert code == ExitCode.USAGE, err
    assert "not a plain directory name" in err
    assert not (tmp_path / ".github").exists()
    assert not (tmp_path / "model_cards" / name / "release.toml").exists()


def test_init_refuses_unsafe_parent_directories_with_github(
    tmp_path: Path, cli: CliRun
) -> None:
    """With --github every directory from the repository root down is written into YAML: each is checked."""
    (tmp_path / ".git").mkdir()
    code, _, err = cli(["init", str(tmp_path / "cards${{ github.token }}" / "mymodel"), "--name", "mymodel",
                        "--base-model", "acme/My-7B", "--owner", "acme", "--github", "--install", INSTALL])
    assert code == ExitCode.USAGE, err
    assert not (tmp_path / ".github").exists()


def test_init_github_paths_are_quoted(tmp_path: Path, cli: CliRun) -> None:
    """The generated workflows quote the manifest path wherever it is a YAML scalar."""
    import yaml

    (tmp_path / ".git").mkdir()
    code, _, err = cli(["init", str(tmp_path / "model_cards" / "my.model-1"), "--name", "mymodel", "--base-model",
                        "acme/My-7B", "--owner", "acme", "--github", "--install", INSTALL])
    assert code == 0, err
    for name in ("ci.yml", "release.yml"):
        text = (tmp_path / ".github" / "workflows" / name).read_text()
        assert 'MANIFEST: "model_cards/my.model-1/release.toml"' in text
        yaml.safe_load(text)


def test_a_stages_progress_lines_and_announcements_print_as_written() -> None:
    """`echo` (publish's progress lines) and `say` (a Hub started, a note) read no markup, act on no control."""
    from hfrelease.cli.output import echo, err_console, say

    for write in (echo, say):
        with err_console.capture() as captured:
            write("pip install 'plugin[extra]' [bold]x[/] \x1b[2J")
        assert captured.get() == "pip install 'plugin[extra]' [bold]x[/] \\x1b[2J\n"


def test_a_hub_root_with_brackets_prints_whole(tmp_path: Path, cli: CliRun) -> None:
    """`compare --hub local --hub-root ".../hub [main]"` names the root as given: Rich ate `[main]` as markup
    (it printed `root .../hub ;`) when the CLI handed the announcement to the console's markup."""
    root = tmp_path / "hub [main]"
    code, _, err = cli(["compare", "v0.0", "v0.1", "--manifest", str(FAMILY), "--hub", "local",
                        "--hub-root", str(root)])
    assert code == ExitCode.USAGE  # no such release tag on an empty Hub: read after the Hub is announced
    assert f"(root {root}; token in {root}/token)" in " ".join(err.split())
