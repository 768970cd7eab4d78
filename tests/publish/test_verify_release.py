"""`hfrelease verify` against a Hub someone tampered with: the local bundle, the LFS oids, every repo reported.

A release is published with the CLI to the built-in Hub, then changed on the Hub the way someone with
push access could: a file and its MANIFEST line replaced together and the tag moved, so the Hub agrees
with itself. Only a copy of the hashes kept off the Hub can tell.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from hfrelease.hub import HubServer
from tests.conftest import CliRun
from tests.publish_family import TOKEN, make_family

pytestmark = pytest.mark.usefixtures("publish_isolation")

Q0, Q1 = "alice/Tiny-1M-Q0", "alice/Tiny-1M-Q1"


@pytest.fixture
def released(tmp_path: Path, hub: HubServer, cli: CliRun, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A two-quant family published with `hfrelease publish` (no plugin: its check runs pip)."""
    family = make_family(tmp_path / "family")
    toml = family / "release.toml"
    toml.write_text(toml.read_text().replace('[serve]\nplugin = "vllm_plugin"\n', ""))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    code, _, err = cli(["publish", str(family), "--hub", hub.url])
    assert code == 0, err
    return family


def _retag(api: HfApi, repo: str, path: str, data: bytes) -> None:
    """Replace `path` and its MANIFEST line in one commit on main, then move v1.0 to that commit."""
    manifest = Path(api.hf_hub_download(repo, "MANIFEST", revision="v1.0")).read_text()
    line = f"{hashlib.sha256(data).hexdigest()} {len(data)} {path}"
    lines = [line if entry.endswith(f" {path}") and not entry.startswith("#") else entry
             for entry in manifest.splitlines()]
    text = "\n".join(lines) + "\n"
    api.create_commit(repo, [CommitOperationAdd(path, data), CommitOperationAdd("MANIFEST", text.encode())],
                      commit_message="fix")  # fmt: skip
    api.delete_tag(repo, tag="v1.0")
    api.create_tag(repo, tag="v1.0")


def _verify(cli: CliRun, family: Path, hub: HubServer, tmp_path: Path, *args: str) -> tuple[int, Any, str]:
    code, out, err = cli(["verify", str(family), "--hub", hub.url, "--out", str(tmp_path / "dl"), "--json", *args])
    return code, json.loads(out), err


def test_verify_passes_an_untouched_release_against_the_bundle_publish_kept(
    released: Path, hub: HubServer, cli: CliRun, tmp_path: Path
) -> None:
    """Right after publishing, every repo is compared with MANIFEST, the LFS oids and the local bundle."""
    code, data, err = _verify(cli, released, hub, tmp_path)
    assert code == 0, err
    assert data["ok"] is True
    assert [(r["repo"], r["ok"], r["compared_with"]) for r in data["verified"]] == [
        (repo, True, ["MANIFEST", "Hub LFS oids", "local bundle"]) for repo in (Q0, Q1)]
    assert (released / ".hfrelease" / "bundle" / "v1.0" / "q0" / "MANIFEST").is_file()


def test_file_and_manifest_line_replaced_and_retagged_fails_naming_the_file(
    released: Path, hub: HubServer, api: HfApi, cli: CliRun, tmp_path: Path
) -> None:
    """A weight swapped with its MANIFEST line and the tag moved: the Hub agrees with itself; verify does not."""
    _retag(api, Q0, "model.safetensors", b"other weights " * 300)
    code, data, err = _verify(cli, released, hub, tmp_path)
    assert code == 7, err
    first, second = data["verified"]
    assert first["ok"] is False and second["ok"] is True
    assert any(p.startswith("model.safetensors: sha256") and "local bundle" in p for p in first["problems"])
    assert any(p.startswith("MANIFEST: differs from the local bundle") for p in first["problems"])
    assert "model.safetensors" in err and Q0 in err


def test_two_tampered_repos_are_both_reported(
    released: Path, hub: HubServer, api: HfApi, cli: CliRun, tmp_path: Path
) -> None:
    """Verify does not stop at the first bad repo: both are in the JSON, the table and the error."""
    _retag(api, Q0, "model.safetensors", b"other weights " * 300)
    _retag(api, Q1, "config.json", b'{"architectures": ["Other"]}')
    code, data, err = _verify(cli, released, hub, tmp_path)
    assert code == 7, err
    assert [r["ok"] for r in data["verified"]] == [False, False]
    assert any(p.startswith("config.json:") for p in data["verified"][1]["problems"])
    assert "2 of 2 published repo(s) do not match" in err
    assert f"{Q0} @ v1.0: model.safetensors" in err and f"{Q1} @ v1.0: config.json" in err
    # The table still lists every repo.
    code, out, _ = cli(["verify", str(released), "--hub", hub.url, "--out", str(tmp_path / "dl2")])
    assert code == 7 and Q0 in out and Q1 in out and out.count("problem(s)") == 2


def test_local_bundle_mismatch_is_caught(
    released: Path, hub: HubServer, cli: CliRun, tmp_path: Path
) -> None:
    """`--bundle DIR` (a `hfrelease bundle --out` directory) that differs from the Hub names the file."""
    (released / "q1" / "README.md").write_text("---\nlicense: mit\n---\n# a card nobody published\n")
    code, _, err = cli(["bundle", str(released), "--out", str(tmp_path / "bundle")])
    assert code == 0, err
    code, data, err = _verify(cli, released, hub, tmp_path, "--bundle", str(tmp_path / "bundle"))
    assert code == 7, err
    assert [r["ok"] for r in data["verified"]] == [True, False]
    assert data["verified"][1]["local_bundle"] == str(tmp_path / "bundle" / "q1" / "MANIFEST")
    assert any(p.startswith("README.md: sha256") for p in data["verified"][1]["problems"])


def test_a_bundle_dir_without_the_repo_is_a_problem_not_a_skip(
    released: Path, hub: HubServer, cli: CliRun, tmp_path: Path
) -> None:
    """Asked to compare with a bundle that lacks a repo, verify says so rather than checking less."""
    code, _, err = cli(["bundle", str(released), "--artifact", "q0", "--out", str(tmp_path / "bundle")])
    assert code == 0, err
    code, data, _ = _verify(cli, released, hub, tmp_path, "--bundle", str(tmp_path / "bundle"))
    assert code == 7
    assert data["verified"][0]["ok"] is True
    assert data["verified"][1]["problems"][0].startswith("no local bundle for q1")


def test_served_bytes_that_differ_from_the_hubs_own_ids_are_caught(
    released: Path, hub: HubServer, cli: CliRun, tmp_path: Path
) -> None:
    """Stored bytes that no longer match the Hub's LFS oid (a weight) or git blob id (config.json) are named."""
    for name in ("model.safetensors", "config.json"):
        sha = hashlib.sha256((released / "checkpoints" / "q0" / name).read_bytes()).hexdigest()
        (stored,) = [p for p in (tmp_path / "hub").rglob(sha) if p.is_file()]
        stored.chmod(0o644)
        stored.write_bytes(bytes(b ^ 0xFF for b in stored.read_bytes()))
    code, data, err = _verify(cli, released, hub, tmp_path)
    assert code == 7, err
    problems = data["verified"][0]["problems"]
    assert any(p.startswith("model.safetensors: downloads as sha256") and "LFS oid" in p for p in problems)
    assert any(p.startswith("config.json: downloads as git blob") for p in problems)


def test_a_repo_gone_from_the_hub_does_not_hide_the_others(
    released: Path, hub: HubServer, api: HfApi, cli: CliRun, tmp_path: Path
) -> None:
    """The first repo deleted on the Hub: it is reported as not found, and the second is still verified."""
    api.delete_repo(Q0)
    code, data, err = _verify(cli, released, hub, tmp_path)
    assert code == 7, err
    (gone,), checked = data["verified"][0]["problems"], data["verified"][1]
    assert "404" in gone and Q0 in gone
    assert checked["ok"] is True and checked["files"] > 0


def test_without_out_each_verify_downloads_into_a_fresh_temporary_directory(
    released: Path, hub: HubServer, cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --out: the stage makes a new hfrelease-verify-* directory per run; a bad selection makes none."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    code, _, err = cli(["verify", str(released), "--hub", hub.url, "--artifact", "nope"])
    assert code == 3 and "nope" in err and list((tmp_path / "tmp").iterdir()) == []
    runs = [json.loads(cli(["verify", str(released), "--hub", hub.url, "--json"])[1]) for _ in range(2)]
    parents = [{Path(r["directory"]).parent for r in run["verified"]} for run in runs]
    assert all(len(p) == 1 for p in parents) and parents[0] != parents[1]
    assert all(next(iter(p)).parent == tmp_path / "tmp" and next(iter(p)).name.startswith("hfrelease-verify-")
               for p in parents)


def test_without_out_the_download_is_removed_when_verified_and_kept_when_not(
    released: Path, hub: HubServer, api: HfApi, cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --out: a release that verifies leaves nothing in the temp dir (its whole download stayed there
    before); one that does not keeps its download, and says where."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    code, out, err = cli(["verify", str(released), "--hub", hub.url, "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["download"] is None and data["download_removed"] is True
    assert list(scratch.iterdir()) == []
    code, out, err = cli(["verify", str(released), "--hub", hub.url])
    assert code == 0 and "the download was removed" in err and list(scratch.iterdir()) == []
    _retag(api, Q0, "model.safetensors", b"other weights " * 300)
    code, out, err = cli(["verify", str(released), "--hub", hub.url])
    assert code == 7, err
    (kept,) = scratch.iterdir()
    assert kept.name.startswith("hfrelease-verify-") and (kept / "q0" / "model.safetensors").is_file()
    assert f"kept for inspection in {kept}" in " ".join(err.split())
