"""One tree, one allowlist: hostile files are refused by `check`, `bundle`, `render` and `publish` alike.

Each case is one a careless or hostile family really held (issue 16): absolute and `..` paths in `files`, links
out of the tree in results/, sections/ and the plugin (to a file and to a directory), a token in a file with
no suffix, a binary that is not weights, pickles under names a suffix check missed. Families are the small
real ones of tests/publish_family.py; commands run through the CLI (the `cli` fixture) or the functions
it calls, publish against the built-in Hub with huggingface_hub's own client.
"""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi

from hfrelease.bundle import BundleRefusedError, bundle_family
from hfrelease.hub import HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from tests.conftest import CliRun
from tests.publish_family import fake_plugin_check, make_family, write_weights

TOKEN = "hf_" + "Zq7" * 10  # shaped like a Hugging Face token (redact's pattern), never a real one


def _declare(family: Path, *files: str, artifact: str = "q0") -> None:
    """Set `files` of artifact `artifact` (q0 is artifact[1]: the reference comes first); its checkpoint's
    train_command.txt goes unless still declared (an undeclared file would be one more refusal)."""
    toml = family / "release.toml"
    old = f"checkpoints/{artifact}/train_command.txt"
    toml.write_text(toml.read_text().replace(f'files = ["{old}"]', "files = " + json.dumps(list(files))))
    if old not in files:
        (family / old).unlink()


def _check(cli: CliRun, family: Path) -> tuple[int, dict[str, str]]:
    """`hfrelease check --json --offline FAMILY`: (exit code, location -> message of each problem)."""
    code, out, _ = cli(["check", str(family), "--json", "--offline"])
    result: dict[str, Any] = json.loads(out)
    return code, {p["location"]: p["message"] for p in result.get("problems", [])}


def _bundle_refusals(family: Path) -> list[str]:
    with pytest.raises(BundleRefusedError) as caught:
        bundle_family(load_manifest(family), plugin_checker=fake_plugin_check)
    return [r.render() for r in caught.value.refusals]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the family (not in it), holding what a deploy script left: a token."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "deploy_notes").write_text(f"export HF_TOKEN={TOKEN}\n")
    return directory


def test_check_refuses_absolute_and_dotdot_files_with_their_place(cli: CliRun, family: Path, outside: Path) -> None:
    """files = ["/etc/hostname", "../outside/deploy_notes"]: exit 3, both named at artifact[1].files[i]."""
    _declare(family, "/etc/hostname", "../outside/deploy_notes")
    code, problems = _check(cli, family)
    assert code == 3
    assert "outside" in problems["artifact[1].files[0]"] and "/etc/hostname" in problems["artifact[1].files[0]"]
    assert "outside" in problems["artifact[1].files[1]"] and "deploy_notes" in problems["artifact[1].files[1]"]
    assert TOKEN not in json.dumps(problems)


def test_bundle_refuses_files_outside_the_tree(cli: CliRun, family: Path, outside: Path) -> None:
    """`hfrelease bundle` of the same family ships nothing: exit 3, each outside file named."""
    _declare(family, "/etc/hostname", "../outside/deploy_notes")
    code, out, err = cli(["bundle", str(family), "--json"])
    assert code == 3 and out == ""
    assert "/etc/hostname" in err and "deploy_notes" in err and TOKEN not in err


def test_publish_of_a_file_outside_the_tree_sends_nothing(family: Path, outside: Path, api: HfApi,
                                                          hub: HubServer) -> None:  # fmt: skip
    """Publishing to the built-in Hub stops before the first request that writes: no repo, no byte, no token."""
    _declare(family, "../outside/deploy_notes")
    with pytest.raises(BundleRefusedError):
        publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check)
    requests = hub.stats()["requests"]
    assert not {"repo-create", "commit", "preupload", "lfs-upload"} & set(requests)
    assert not api.repo_exists("alice/Tiny-1M-Q0") and not api.repo_exists("alice/Tiny-1M-Q1")


def test_token_in_a_suffixless_declared_file_is_refused(cli: CliRun, family: Path) -> None:
    """notes/deploy_notes inside the family holds an hf_ token: check and bundle refuse it, whatever its suffix."""
    (family / "notes").mkdir()
    (family / "notes" / "deploy_notes").write_text(f"export HF_TOKEN={TOKEN}\n")
    _declare(family, "notes/deploy_notes")
    code, problems = _check(cli, family)
    assert code == 3 and "access token" in problems["artifact[1].files[0]"]
    [refusal] = _bundle_refusals(family)
    assert "deploy_notes" in refusal and "token" in refusal and TOKEN not in refusal


def test_token_past_the_first_megabyte_is_found(family: Path) -> None:
    """A 3 MiB val_metrics.json with a token at its end is read in full, not skipped for its size."""
    big = family / "checkpoints" / "q0" / "val_metrics.json"
    big.write_text('{"pad": "' + "x" * (3 * 1024 * 1024) + f'", "note": "{TOKEN}"}}\n')
    _declare(family, "checkpoints/q0/train_command.txt", "checkpoints/q0/val_metrics.json")
    [refusal] = _bundle_refusals(family)
    assert "val_metrics.json" in refusal and "token" in refusal


def test_binary_that_is_not_weights_is_refused(cli: CliRun, family: Path) -> None:
    """A declared binary blob and random bytes named .safetensors in the checkpoint are both refused."""
    (family / "checkpoints" / "q0" / "blob.dat").write_bytes(bytes(range(256)) * 16)
    (family / "checkpoints" / "q0" / "extra.safetensors").write_bytes(bytes(range(256)) * 16)
    _declare(family, "checkpoints/q0/train_command.txt", "checkpoints/q0/blob.dat")
    code, problems = _check(cli, family)
    assert code == 3
    assert "binary" in problems["artifact[1].files[1]"]
    assert "not a safetensors file" in problems["artifact[1].source.path"]
    refusals = _bundle_refusals(family)
    assert len(refusals) == 2 and any("blob.dat" in r for r in refusals) and any("extra.safetensors" in r
                                                                                   for r in refusals)  # fmt: skip


def test_safetensors_metadata_holding_a_token_is_refused(family: Path) -> None:
    """Real weights whose header metadata carries a token are refused (the header is scanned like text)."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros(4, dtype=np.uint8)}, str(family / "checkpoints" / "q0" / "model.safetensors"),
              metadata={"pushed_with": TOKEN})  # fmt: skip
    [refusal] = _bundle_refusals(family)
    assert "model.safetensors" in refusal and "metadata" in refusal


@pytest.mark.parametrize("name", ["train_state.pth.tar", "optimizer.pt.gz", "state"])
def test_declared_pickles_are_refused(cli: CliRun, family: Path, name: str) -> None:
    """A declared pickle is refused by check and bundle, by any of its suffixes or, with none, by its bytes."""
    (family / "checkpoints" / "q0" / name).write_bytes(pickle.dumps({"step": 1000}, protocol=4))
    _declare(family, "checkpoints/q0/train_command.txt", f"checkpoints/q0/{name}")
    code, problems = _check(cli, family)
    assert code == 3 and "pickle" in problems["artifact[1].files[1]"]
    [refusal] = _bundle_refusals(family)
    assert name in refusal and "pickle" in refusal


def _samples_name() -> str:
    return "gate-x-0123456789ab-0123456789ab.samples.jsonl.gz"


def test_linked_samples_file_in_results_is_refused(cli: CliRun, family: Path, outside: Path) -> None:
    """results/q0/*.samples.jsonl.gz linked to an outside file: refused by check and bundle, never shipped."""
    stolen = outside / "stolen.gz"
    stolen.write_bytes(gzip.compress(b"outside data\n"))
    (family / "results" / "q0").mkdir(parents=True)
    (family / "results" / "q0" / _samples_name()).symlink_to(stolen)
    code, problems = _check(cli, family)
    assert code == 3 and "outside" in problems[f"results/q0/{_samples_name()}"]
    [refusal] = _bundle_refusals(family)
    assert _samples_name() in refusal and str(stolen) in refusal


def test_results_directory_linked_out_of_the_tree_is_refused(family: Path, outside: Path) -> None:
    """results/q0 itself a link to a directory outside: nothing under it is read or shipped."""
    (outside / "records").mkdir()
    (outside / "records" / _samples_name()).write_bytes(gzip.compress(b"x\n"))
    (family / "results").mkdir()
    (family / "results" / "q0").symlink_to(outside / "records", target_is_directory=True)
    [refusal] = _bundle_refusals(family)
    assert "results/q0" in refusal and "outside" in refusal


def test_linked_section_is_refused_and_never_reaches_the_card(cli: CliRun, family: Path, outside: Path) -> None:
    """sections/summary.md linked out of the tree: check reports it, render stops (exit 3), the card lacks it."""
    (outside / "prose.md").write_text("PROSE FROM OUTSIDE THE FAMILY\n")
    (family / "sections").mkdir()
    (family / "sections" / "summary.md").symlink_to(outside / "prose.md")
    code, problems = _check(cli, family)
    assert code == 3 and "outside" in problems["sections/summary.md"]
    before = (family / "q0" / "README.md").read_text()
    code, _, err = cli(["render", str(family)])
    assert code == 3 and "sections/summary.md" in err
    assert (family / "q0" / "README.md").read_text() == before


def test_section_directory_linked_out_of_the_tree_is_refused(cli: CliRun, family: Path, outside: Path) -> None:
    """sections/q0 linked to an outside directory: its summary.md is not quoted by any card."""
    (outside / "q0").mkdir()
    (outside / "q0" / "summary.md").write_text("PROSE FROM OUTSIDE THE FAMILY\n")
    (family / "sections").mkdir()
    (family / "sections" / "q0").symlink_to(outside / "q0", target_is_directory=True)
    code, problems = _check(cli, family)
    assert code == 3 and "outside" in problems["sections/q0"]
    code, _, _ = cli(["render", str(family)])
    assert code == 3 and "PROSE FROM OUTSIDE" not in (family / "q0" / "README.md").read_text()


def test_link_inside_the_plugin_out_of_the_tree_is_reported_by_check(cli: CliRun, family: Path,
                                                                     outside: Path) -> None:  # fmt: skip
    """A plugin module linking outside the family: check names it at serve.plugin (bundle already refused it)."""
    (family / "vllm_plugin" / "tiny_plugin" / "notes.py").symlink_to(outside / "deploy_notes")
    code, problems = _check(cli, family)
    assert code == 3 and "outside" in problems["serve.plugin"]


def test_plugin_directory_out_of_the_tree_is_refused(cli: CliRun, family: Path, outside: Path) -> None:
    """vllm_plugin itself a link to a package outside the family: refused, not shipped as vllm_plugin/."""
    (family / "vllm_plugin").rename(outside / "plugin")
    (family / "vllm_plugin").symlink_to(outside / "plugin", target_is_directory=True)
    code, problems = _check(cli, family)
    assert code == 3 and "outside" in problems["serve.plugin"]
    refusals = _bundle_refusals(family)
    assert refusals and all("vllm_plugin" in r and "outside" in r for r in refusals)


def test_check_reports_every_file_problem_at_once(cli: CliRun, family: Path, outside: Path) -> None:
    """Outside paths, a suffix-less token, pickles, a linked section and results entry: one run, each placed."""
    (family / "notes").mkdir()
    (family / "notes" / "deploy_notes").write_text(f"{TOKEN}\n")
    (family / "checkpoints" / "q1" / "train_state.pth.tar").write_bytes(pickle.dumps([1], protocol=2))
    _declare(family, "checkpoints/q1/train_state.pth.tar", artifact="q1")
    (family / "checkpoints" / "q1" / "optimizer.pt").write_bytes(pickle.dumps([2], protocol=4))  # undeclared
    _declare(family, "/etc/hostname", "../outside/deploy_notes", "notes/deploy_notes")
    (family / "sections").mkdir()
    (family / "sections" / "summary.md").symlink_to(outside / "deploy_notes")
    (family / "results" / "q1").mkdir(parents=True)
    (family / "results" / "q1" / _samples_name()).symlink_to(outside / "deploy_notes")
    code, problems = _check(cli, family)
    assert code == 3
    assert {"artifact[1].files[0]", "artifact[1].files[1]", "artifact[1].files[2]", "artifact[2].files[0]",
            "artifact[2].source.path", "sections/summary.md", f"results/q1/{_samples_name()}"} <= set(problems)
    assert not any(TOKEN in m for m in problems.values())


def test_clean_family_passes_check_and_ships_plots_and_ledger(cli: CliRun, tmp_path: Path) -> None:
    """Control: links inside the tree, a rendered PNG plot and real weights pass check and bundle."""
    family = make_family(tmp_path / "family")
    plots = family / "q0" / "plots"
    plots.mkdir()
    (plots / "quality.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    shared = family / "shared" / "train_command.txt"
    shared.parent.mkdir()
    shared.write_text("llmcompressor oneshot\n")
    (family / "checkpoints" / "q0" / "train_command.txt").unlink()
    (family / "checkpoints" / "q0" / "train_command.txt").symlink_to(shared)  # a link that stays in the family
    write_weights(family / "checkpoints" / "q0" / "model-00002.safetensors", 128, seed=5)
    code, problems = _check(cli, family)
    assert (code, problems) == (0, {})
    paths = {f.path for f in bundle_family(load_manifest(family), plugin_checker=fake_plugin_check).repos[0].files}
    assert {"plots/quality.png", "train_command.txt", "model-00002.safetensors"} <= paths


def test_render_refuses_a_ledger_link_out_of_the_tree(cli: CliRun, family: Path, outside: Path) -> None:
    """A record of the unpublished reference linked from outside: check places it, render reads none of it."""
    (outside / "gate-x-0123456789ab-0123456789ab.json").write_text("{}\n")
    (family / "results" / "ref").mkdir(parents=True)
    (family / "results" / "ref" / "gate-x-0123456789ab-0123456789ab.json").symlink_to(
        outside / "gate-x-0123456789ab-0123456789ab.json"
    )
    code, problems = _check(cli, family)
    assert code == 3 and "outside" in problems["results/ref/gate-x-0123456789ab-0123456789ab.json"]
    code, _, err = cli(["render", str(family)])
    assert code == 3 and "results/ref/gate-x-0123456789ab-0123456789ab.json" in err


def test_fifo_section_is_refused_without_reading_it(cli: CliRun, family: Path) -> None:
    """sections/summary.md as a FIFO (a read would wait forever): check and render refuse it at once."""
    import os

    (family / "sections").mkdir()
    os.mkfifo(family / "sections" / "summary.md")
    code, problems = _check(cli, family)
    assert code == 3 and "regular file" in problems["sections/summary.md"]
    code, _, err = cli(["render", str(family)])
    assert code == 3 and "sections/summary.md" in err


def test_release_check_job_stops_on_a_file_outside_the_tree(cli: CliRun, family: Path, outside: Path) -> None:
    """The release workflow's check job (`release --only check`) refuses it too, before any eval job starts."""
    _declare(family, "../outside/deploy_notes")
    code, out, err = cli(["release", str(family), "--tag", "v1.0", "--only", "check"])
    assert code == 3 and out == ""
    assert "artifact[1].files[0]" in err and "deploy_notes" in err and TOKEN not in err


def test_per_epoch_val_metrics_keep_their_epoch_directory(family: Path) -> None:
    """speculators' <epoch>/val_metrics.json files declared from the family directory ship as <epoch>/val_metrics.json
    (by name alone every epoch's would claim one repo path); a train_command.txt beside them ships by name."""
    training = family / "training"
    for epoch in (0, 1):
        (training / str(epoch)).mkdir(parents=True)
        (training / str(epoch) / "val_metrics.json").write_text(json.dumps({"loss_epoch": 2.0 - epoch}))
    (training / "train_command.txt").write_text("# Git SHA: abc\nspeculators train --epochs 2\n")
    _declare(family, "training/train_command.txt", "training/0/val_metrics.json", "training/1/val_metrics.json")
    [bundle] = [b for b in bundle_family(load_manifest(family), plugin_checker=fake_plugin_check).repos
                if b.artifact_id == "q0"]
    paths = {f.path for f in bundle.files}
    assert {"train_command.txt", "0/val_metrics.json", "1/val_metrics.json"} <= paths
