"""`hfrelease release`'s settings refuse options that do not go together (exit 2), whoever builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import ExitCode, UsageError
from hfrelease.stages.release import ReleaseSettings
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

BUNDLE, SIGNED = Path("bundle"), Path("bundle.sigstore.json")
SELECTION = "--artifact and --gate apply with --only"

# Each bad combination: the settings' fields, the command line's options, what the message says.
REFUSED: dict[str, tuple[dict[str, Any], list[str], str]] = {
    "--artifact without --only": ({"artifacts": ("fp8",)}, ["--artifact", "fp8"], SELECTION),
    "--gate without --only": ({"gates": ("arith",)}, ["--gate", "arith"], SELECTION),
    "--from-bundle without --only": ({"from_bundle": BUNDLE}, ["--from-bundle", "{bundle}"],
                                     "--from-bundle and --attestation apply with --only publish"),
    "--from-bundle with --only gate": ({"step": "gate", "from_bundle": BUNDLE},
                                       ["--only", "gate", "--from-bundle", "{bundle}"],
                                       "--from-bundle and --attestation apply with --only publish"),
    "--attestation with --only check": ({"step": "check", "from_bundle": BUNDLE, "attestation": SIGNED},
                                        ["--only", "check", "--from-bundle", "{bundle}", "--attestation", "{signed}"],
                                        "--from-bundle and --attestation apply with --only publish"),
    "--attestation without --from-bundle": ({"step": "publish", "attestation": SIGNED},
                                            ["--only", "publish", "--attestation", "{signed}"],
                                            "--attestation needs --from-bundle"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_settings_refuse_options_that_do_not_go_together(case: str) -> None:
    """Each bad combination is a usage error (exit 2) naming the options, with a hint to the help."""
    fields, _, message = REFUSED[case]
    with pytest.raises(UsageError) as info:
        ReleaseSettings(manifest=Path("fam"), **fields)
    assert info.value.exit_code == ExitCode.USAGE and message in info.value.message
    assert info.value.hint is not None and "--help" in info.value.hint


@pytest.mark.parametrize("case", REFUSED)
def test_the_command_refuses_them_before_reading_the_manifest(case: str, cli: CliRun, tmp_path: Path) -> None:
    """`hfrelease release` exits 2 with the settings' message, before a manifest (here: none) is read."""
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle.sigstore.json").write_text("{}")
    _, options, message = REFUSED[case]
    paths = {"bundle": str(tmp_path / "bundle"), "signed": str(tmp_path / "bundle.sigstore.json")}
    code, out, err = cli(["release", str(tmp_path / "no-family"), *(o.format(**paths) for o in options)])
    assert code == ExitCode.USAGE and message in err and "error:" in err and out == ""
    assert "This is a bug" not in err


def test_settings_accept_what_goes_together() -> None:
    """The rehearsal alone, a step with a selection, and a bundle's publish with its attestation are accepted."""
    ReleaseSettings(manifest=Path("fam"))
    ReleaseSettings(manifest=Path("fam"), step="gate", artifacts=("fp8",), gates=("arith",))
    settings = ReleaseSettings(manifest=Path("fam"), step="publish", from_bundle=BUNDLE, attestation=SIGNED)
    assert settings.hub == "local" and settings.work_dir is None


def test_step_settings_carry_every_option(fixture_family: Path, tmp_path: Path) -> None:
    """A step's settings are the command's, its manifest loaded; a bundle's publish loads it without its files."""
    settings = ReleaseSettings(manifest=fixture_family, step="publish", hub="manifest", tag="v1", artifacts=("fp8",),
                               hub_root=tmp_path / "hub", work_dir=tmp_path / "work", from_bundle=tmp_path)
    step = settings.step_settings()
    assert step.manifest.root.resolve() == fixture_family.resolve()
    assert (step.tag, step.artifacts, step.hub, step.hub_root, step.work_dir, step.from_bundle) == (
        "v1", ("fp8",), "manifest", tmp_path / "hub", tmp_path / "work", tmp_path)
