"""`hfrelease eval --speed` option handling: combinations refused before anything is planned."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.cli import main
from hfrelease.errors import ExitCode
from hfrelease.stages.runner import worst as _worst

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("args", "message"), [
    (["--workload", "chat"], "add --speed or --speed-only"),
    (["--speed-only", "--gate", "arith"], "--speed-only skips"),
    (["--speed", "--endpoint", "http://127.0.0.1:8000", "--artifact", "ref"], "one per speculative config"),
])
def test_speed_options_refused(args: list[str], message: str, capsys: pytest.CaptureFixture[str],
                               fixture_family: Path) -> None:
    """Contradictory options exit with the usage code and say which option to change.

    On the fixture family, whose files are in the repository: the demo manifest's prompts exist only once the
    demo is built, and a fresh clone's fast tests run before (or without) the build."""
    with pytest.raises(SystemExit) as raised:
        main(["eval", str(fixture_family), *args])
    assert raised.value.code == ExitCode.USAGE
    assert message in capsys.readouterr().err


def test_combined_exit_code_is_the_most_serious() -> None:
    """Gates and speed anchors together exit with the worse status: server > void > gate failed > ok."""
    assert _worst(ExitCode.OK, ExitCode.GATE_FAILED) == ExitCode.GATE_FAILED
    assert _worst(ExitCode.GATE_FAILED, ExitCode.MEASUREMENT_FAILED) == ExitCode.MEASUREMENT_FAILED
    assert _worst(ExitCode.SERVER_FAILED, ExitCode.MEASUREMENT_FAILED) == ExitCode.SERVER_FAILED
    assert _worst(ExitCode.OK, ExitCode.OK) == ExitCode.OK
