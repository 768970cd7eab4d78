"""upload-artifact / download-artifact semantics: roots, globs, exclusions, hidden files, names, patterns."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.ci.actions.artifact import ArtifactStepError, ArtifactStore, find_files


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with a family directory holding a hidden .eval_results and a nested results folder."""
    root = tmp_path / "ws"
    for name in ("fam/a/README.md", "fam/a/.eval_results/gsm8k.yaml", "fam/results/r1.json", "fam/.hfrelease/x",
                 "runs/log.txt", "other/b.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    return root


def _store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(root=tmp_path / "store")


def _files(store: ArtifactStore, name: str) -> set[str]:
    return set(store.artifacts[name].files)


def test_a_directory_is_the_root_and_hidden_files_are_left_out(workspace: Path, tmp_path: Path) -> None:
    """`path: fam/` uploads what is below fam/; `.eval_results/` and `.hfrelease/` are dropped by default."""
    store = _store(tmp_path)
    log = store.upload({"name": "family", "path": "fam/"}, workspace=workspace, job="render")
    assert _files(store, "family") == {"a/README.md", "results/r1.json"}
    assert any("left out as hidden" in line and ".eval_results" in line for line in log)


def test_include_hidden_files_and_an_exclusion(workspace: Path, tmp_path: Path) -> None:
    """include-hidden-files: true keeps dotfiles; a `!` line removes what an earlier line matched."""
    store = _store(tmp_path)
    store.upload({"name": "family", "path": "fam/\n!fam/**/.hfrelease/", "include-hidden-files": "true"},
                 workspace=workspace, job="render")
    assert _files(store, "family") == {"a/README.md", "a/.eval_results/gsm8k.yaml", "results/r1.json"}


def test_several_paths_share_their_least_common_ancestor(workspace: Path, tmp_path: Path) -> None:
    """Two search paths keep their structure below their common ancestor (the workspace here)."""
    files, root = find_files("fam/results/\nruns/*.txt", workspace=workspace, include_hidden=False)
    assert root == workspace
    assert sorted(f.relative_to(root).as_posix() for f in files) == ["fam/results/r1.json", "runs/log.txt"]


def test_a_single_file_lands_at_the_root(workspace: Path, tmp_path: Path) -> None:
    """A plain file path uploads the file without its directories."""
    store = _store(tmp_path)
    store.upload({"name": "one", "path": "fam/results/r1.json"}, workspace=workspace, job="j")
    assert _files(store, "one") == {"r1.json"}


def test_if_no_files_found(workspace: Path, tmp_path: Path) -> None:
    """warn (default) succeeds with a warning and no artifact; error fails the step; ignore is silent."""
    store = _store(tmp_path)
    assert "Warning" in store.upload({"name": "x", "path": "nothing/"}, workspace=workspace, job="j")[0]
    assert "x" not in store.artifacts
    with pytest.raises(ArtifactStepError, match="No files were found"):
        store.upload({"name": "x", "path": "nothing/", "if-no-files-found": "error"}, workspace=workspace, job="j")
    # A directory holding only hidden files is empty too.
    with pytest.raises(ArtifactStepError, match="No files were found"):
        store.upload({"name": "x", "path": "fam/a/.eval_results/", "if-no-files-found": "error"},
                     workspace=workspace, job="j")


def test_a_name_is_uploaded_once_per_run(workspace: Path, tmp_path: Path) -> None:
    """A second upload under the same name fails (409) unless overwrite: true."""
    store = _store(tmp_path)
    store.upload({"name": "logs", "path": "runs/"}, workspace=workspace, job="a")
    with pytest.raises(ArtifactStepError, match="409"):
        store.upload({"name": "logs", "path": "runs/"}, workspace=workspace, job="b")
    store.upload({"name": "logs", "path": "other/", "overwrite": "true"}, workspace=workspace, job="b")
    assert _files(store, "logs") == {"b.txt"}


def test_download_by_name_pattern_and_merge_multiple(workspace: Path, tmp_path: Path) -> None:
    """`name` extracts into path; `pattern` into path/<name>/, or all into path with merge-multiple."""
    store = _store(tmp_path)
    store.upload({"name": "ledger-a", "path": "fam/results/"}, workspace=workspace, job="eval")
    store.upload({"name": "ledger-b", "path": "other/"}, workspace=workspace, job="eval")
    store.upload({"name": "logs", "path": "runs/"}, workspace=workspace, job="eval")
    target = tmp_path / "job"
    store.download({"name": "logs", "path": "got"}, workspace=target, visible_jobs={"eval"})
    assert (target / "got" / "log.txt").is_file()
    store.download({"pattern": "ledger-*", "path": "ledgers"}, workspace=target, visible_jobs={"eval"})
    assert sorted(p.relative_to(target / "ledgers").as_posix() for p in (target / "ledgers").rglob("*.*")) == [
        "ledger-a/r1.json", "ledger-b/b.txt"]
    store.download({"pattern": "ledger-*", "path": "merged", "merge-multiple": "true"}, workspace=target,
                   visible_jobs={"eval"})
    assert sorted(p.name for p in (target / "merged").iterdir()) == ["b.txt", "r1.json"]
    lines = store.download({"pattern": "nomatch-*", "path": "none"}, workspace=target, visible_jobs={"eval"})
    assert lines[-1] == "Total of 0 artifact(s) downloaded"


def test_download_of_a_missing_name_or_an_unrelated_jobs_artifact_fails(workspace: Path, tmp_path: Path) -> None:
    """A wrong name fails; so does one uploaded by a job the downloader does not need (a race on GitHub)."""
    store = _store(tmp_path)
    store.upload({"name": "release-ledger", "path": "fam/results/"}, workspace=workspace, job="merge")
    with pytest.raises(ArtifactStepError, match="Artifact 'release-ledgr' not found"):
        store.download({"name": "release-ledgr"}, workspace=tmp_path / "j", visible_jobs={"merge"})
    with pytest.raises(ArtifactStepError, match="Artifact 'release-ledger' not found"):
        store.download({"name": "release-ledger"}, workspace=tmp_path / "j", visible_jobs={"check"})


def test_the_release_workflows_family_artifact_keeps_eval_results(tmp_path: Path) -> None:
    """The render job's `release-family` upload, as the template writes it, carries `.eval_results/*.yaml`."""
    from hfrelease.ci.actions.workflow import load_workflow
    from hfrelease.ci.workflows import WorkflowSpec, render_workflows
    from hfrelease.manifest import load_manifest

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "family"
    text = render_workflows(load_manifest(fixtures, check_files=False),
                            WorkflowSpec(manifest="model_cards/fam/release.toml", install="."))["workflows/release.yml"]
    (tmp_path / "release.yml").write_text(text)
    render = load_workflow(tmp_path / "release.yml").jobs["render"]
    upload = next(s for s in render.steps if (s.uses or "").startswith("actions/upload-artifact@"))
    workspace = tmp_path / "ws"
    for name in ("model_cards/fam/fp8/README.md", "model_cards/fam/fp8/.eval_results/gpqa.yaml",
                 "model_cards/fam/.hfrelease/hub/token"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("x")
    store = _store(tmp_path)
    store.upload({k: str(v) for k, v in upload.with_.items()}, workspace=workspace, job="render")
    assert _files(store, "release-family") == {"fp8/README.md", "fp8/.eval_results/gpqa.yaml"}
