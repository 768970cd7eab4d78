"""One selection parser: every command taking --artifact/--gate/--workload reports bad names alike (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.manifest.selection import SelectionError, select
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

BUG = "This is a bug in hfrelease"
# A hostile --artifact list: unknown, misspelt (twice), empty.
ARTIFACTS = ["--artifact", "nope", "--artifact", "fp9", "--artifact", "", "--artifact", "fp9"]
GATES = ["--gate", "arihtm", "--gate", "arihtm"]

# Every command that takes a selection, as a user types it; `{f}` is the family directory.
COMMANDS: dict[str, tuple[list[str], set[str]]] = {
    "eval": (["eval", "{f}", "--dry-run", "--speed", *ARTIFACTS, *GATES, "--workload", "chta"],
             {"artifact", "gate", "workload"}),
    "eval --speed-only": (["eval", "{f}", "--speed-only", *ARTIFACTS, "--workload", "chta"], {"artifact", "workload"}),
    "render": (["render", "{f}", "--diff", *ARTIFACTS], {"artifact"}),
    "bundle": (["bundle", "{f}", *ARTIFACTS], {"artifact"}),
    "publish": (["publish", "{f}", "--dry-run", *ARTIFACTS], {"artifact"}),
    "verify": (["verify", "{f}", "--hub", "http://127.0.0.1:9", *ARTIFACTS], {"artifact"}),
    "verify --serve": (["verify", "{f}", "--hub", "http://127.0.0.1:9", "--serve", "fp9"], {"serve"}),
    "release --only check": (["release", "{f}", "--only", "check", *ARTIFACTS, *GATES], {"artifact", "gate"}),
    "release --only gate": (["release", "{f}", "--only", "gate", *ARTIFACTS, *GATES], {"artifact", "gate"}),
    "release --only publish": (["release", "{f}", "--only", "publish", *ARTIFACTS], {"artifact"}),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_reports_every_bad_name_at_once(command: str, fixture_family: Path, cli: CliRun) -> None:
    """Unknown, misspelt, empty and repeated names: exit 3, each named once with did-you-mean, never exit 1."""
    args, options = COMMANDS[command]
    code, _, err = cli([a.replace("{f}", str(fixture_family)) for a in args])
    assert code == ExitCode.CONFIG, err
    assert BUG not in err
    text = " ".join(err.split())  # Rich wraps long lines
    if "artifact" in options:
        assert "--artifact: no artifact 'nope'" in text
        assert text.count("no artifact 'fp9'") == 1 and "did you mean 'fp8'?" in text
        assert "--artifact: an empty artifact id" in text
    if "gate" in options:
        assert text.count("--gate: no gate 'arihtm'") == 1 and "did you mean 'arith'?" in text
    if "workload" in options:
        assert "--workload: no workload 'chta'" in text and "did you mean 'chat'?" in text
    if "serve" in options:
        assert "--serve: no artifact 'fp9'" in text


@pytest.fixture
def manifest(fixture_family: Path) -> Manifest:
    return load_manifest(fixture_family)


def test_a_repeated_name_selects_once(manifest: Manifest) -> None:
    """Names are kept in the order given, each once; nothing selected means everything."""
    chosen = select(manifest, artifacts=["fp8", "ref", "fp8"], gates=["json", "json"], workloads=["chat"])
    assert (chosen.artifacts, chosen.gates, chosen.workloads) == (("fp8", "ref"), ("json",), ("chat",))
    assert select(manifest).artifacts == ()


def test_the_stages_check_their_selection_too(manifest: Manifest, tmp_path: Path) -> None:
    """A caller that skips the CLI (the rehearsal, a test) gets the same error from the stage itself."""
    from hfrelease.bundle import bundle_family
    from hfrelease.evaluation.plan import plan_eval
    from hfrelease.ledger.store import Ledger
    from hfrelease.publish.decision import eval_matrix
    from hfrelease.speed.plan import plan_speed

    calls = {
        "plan_eval": lambda: plan_eval(manifest, ledger=Ledger(tmp_path), hash_cache=None, gates=["jsn"]),
        "plan_speed": lambda: plan_speed(manifest, ledger=Ledger(tmp_path), hash_cache=None, workloads=["chta"]),
        "eval_matrix": lambda: eval_matrix(manifest, gates=["jsn"]),
        "bundle_family": lambda: bundle_family(manifest, artifacts=["fp9"]),
    }
    for name, call in calls.items():
        with pytest.raises(SelectionError) as info:
            call()
        assert info.value.exit_code == ExitCode.CONFIG and info.value.problems[0].suggestion, name
