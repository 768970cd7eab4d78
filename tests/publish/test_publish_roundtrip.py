"""Publishing a family to the built-in Hub with the real huggingface_hub client: round trip, tag, no-op."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub.lfs
import pytest
from huggingface_hub import HfApi, snapshot_download

from hfrelease.files.hashing import HashCache
from hfrelease.hub import HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family, verify_release
from hfrelease.publish.staging import STAGING_PREFIX
from tests.publish_family import TOKEN, fake_plugin_check, set_version


def _publish(family: Path, api: HfApi, **options: object):  # type: ignore[no-untyped-def]
    return publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, **options)  # type: ignore[arg-type]


def _main_commits(api: HfApi, repo: str) -> list[str]:
    return [c.commit_id for c in api.list_repo_commits(repo)]


def test_round_trip_is_byte_identical_and_tagged(family: Path, api: HfApi, hub: HubServer, tmp_path: Path) -> None:
    """Each repo gets one commit on main, the tag points at it, and a download of the tag equals the bundle."""
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    for plan, outcome in zip(report.plan.repos, report.outcome.repos, strict=True):
        repo = plan.repo
        commits = _main_commits(api, repo)
        assert len(commits) == 2  # the repo's initial commit, then exactly one release commit
        assert outcome.commit == commits[0]
        refs = api.list_repo_refs(repo)
        assert [(t.name, t.target_commit) for t in refs.tags] == [("v1.0", commits[0])]
        assert [b.name for b in refs.branches] == ["main"]  # the staging branch is gone
        snapshot = Path(snapshot_download(repo, revision="v1.0", endpoint=hub.url, token=TOKEN,
                                          cache_dir=tmp_path / "dl"))  # fmt: skip
        for item in plan.bundle.files:
            assert (snapshot / item.path).read_bytes() == item.read()
        assert sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()) == sorted(
            [f.path for f in plan.bundle.files] + [".gitattributes"]
        )
    (listed,) = api.list_collections(owner="alice")
    assert listed.title == "Tiny family"
    assert {i.item_id for i in api.get_collection(listed.slug).items} == {r.repo for r in report.plan.repos}


def test_round_trips_per_repo_stay_within_budget(family: Path, api: HfApi, hub: HubServer) -> None:
    """A first release reads each repo a fixed number of times and downloads only MANIFEST and the card back."""
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    requests, repos = hub.stats()["requests"], len(report.plan.repos)
    # repo-info: plan (404), after create, main before promote; tree: after create, staged, promoted.
    assert requests["repo-info"] == 3 * repos and requests["tree"] == 3 * repos
    assert requests["resolve"] == 2 * repos  # MANIFEST and README.md, one GET each: never a weight file
    assert requests["branch-create"] == requests["branch-delete"] == requests["tag-create"] == repos
    # Whose commit landed is known without reading commits back; new repos have no refs or PRs to list.
    assert not {"commits", "refs", "discussion-list"} & set(requests)


def test_republish_makes_no_commit_and_sends_no_bytes(family: Path, api: HfApi, hub: HubServer) -> None:
    """Publishing the same release again changes nothing and no file byte reaches the server."""
    first = _publish(family, api)
    assert first.outcome is not None
    heads = {r.repo: _main_commits(api, r.repo) for r in first.plan.repos}
    hub.reset_stats()
    again = _publish(family, api)
    assert again.outcome is not None and again.outcome.status == "already-published"
    stats = hub.stats()
    assert stats["file_bytes_received"] == 0
    assert not {"commit", "lfs-upload", "tag-create", "branch-create"} & set(stats["requests"])
    assert {r.repo: _main_commits(api, r.repo) for r in first.plan.repos} == heads


def test_new_version_with_unchanged_weights_sends_no_weight_bytes(family: Path, api: HfApi, hub: HubServer) -> None:
    """v1.1 with a changed card: one more commit per repo, only small files sent, the new tag at it."""
    _publish(family, api)
    set_version(family, "1.1")
    (family / "q0" / "README.md").write_text("# Tiny-1M q0, now with results\n")
    hub.reset_stats()
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    assert hub.stats()["lfs_bytes_received"] == 0
    q0 = report.plan.repos[0]
    assert {f.path for f in q0.changes.changed} == {"README.md", "MANIFEST"}
    assert "now with results" in q0.card_diff
    for repo in report.plan.repos:
        commits = _main_commits(api, repo.repo)
        assert len(commits) == 3
        tags = {t.name: t.target_commit for t in api.list_repo_refs(repo.repo).tags}
        assert tags["v1.1"] == commits[0] and tags["v1.0"] == commits[1]


def test_huggingface_hub_never_rehashes_weights(
    family: Path, api: HfApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundle's sha256 is the upload's: huggingface_hub's own file hashing is never called."""
    calls: list[object] = []
    real = huggingface_hub.lfs.sha_fileobj
    monkeypatch.setattr(huggingface_hub.lfs, "sha_fileobj", lambda f, *a, **k: calls.append(f) or real(f, *a, **k))
    cache = HashCache(tmp_path / "c.json")
    report = _publish(family, api, cache=cache)
    assert report.outcome is not None and report.outcome.status == "published"
    assert calls == []
    sizes = {f.source: f.size for r in report.bundle.repos for f in r.files if f.source}
    assert cache.bytes_read == sum(sizes.values())


def test_dry_run_plans_and_pushes_nothing(family: Path, api: HfApi, hub: HubServer) -> None:
    """A dry run lists added files and bytes per repo and the tag; the Hub receives no write."""
    report = _publish(family, api, dry_run=True)
    assert report.dry_run and report.outcome is None
    q0 = report.plan.repos[0]
    assert q0.main is None and q0.action == "create repo, commit, tag"
    assert {f.path for f in q0.changes.added} == {f.path for f in q0.bundle.files}
    assert q0.changes.bytes_to_send == q0.bundle.size
    assert "+# Tiny-1M q0 1.0" in q0.card_diff
    writes = {"commit", "repo-create", "lfs-upload", "tag-create", "branch-create"}
    assert not writes & set(hub.stats()["requests"])


def test_dry_run_is_the_default_without_a_token(family: Path, hub: HubServer) -> None:
    """No token anywhere (no HF_TOKEN, empty HF_HOME): the plan is shown, nothing pushed."""
    report = publish_family(load_manifest(family), hub=hub.url, plugin_checker=fake_plugin_check)
    assert report.dry_run and report.dry_run_reason is not None and "no Hub token" in report.dry_run_reason
    assert "repo-create" not in hub.stats()["requests"]


def test_deleted_file_is_planned_and_removed(family: Path, api: HfApi) -> None:
    """A file dropped from the bundle is deleted from the repo by the next release."""
    _publish(family, api)
    set_version(family, "1.1")
    (family / "q0" / "CITATION.cff").unlink()
    report = _publish(family, api)
    assert report.plan.repos[0].changes.deleted == ("CITATION.cff",)
    assert "CITATION.cff" not in api.list_repo_files("alice/Tiny-1M-Q0", revision="v1.1")
    assert "CITATION.cff" in api.list_repo_files("alice/Tiny-1M-Q0", revision="v1.0")


def test_pr_mode_stages_without_touching_main(family: Path, api: HfApi) -> None:
    """--pr opens one pull request per repo and stops; a re-run reuses it; publishing then tags main."""
    staged = _publish(family, api, pr=True)
    assert staged.outcome is not None and staged.outcome.status == "staged"
    assert all(o.staged_ref == "refs/pr/1" for o in staged.outcome.repos)
    repo = staged.plan.repos[0].repo
    assert len(_main_commits(api, repo)) == 1 and api.list_repo_refs(repo).tags == []
    _publish(family, api, pr=True)
    assert [d.num for d in api.get_repo_discussions(repo)] == [1]  # no second pull request
    done = _publish(family, api)
    assert done.outcome is not None and done.outcome.status == "published"
    assert [t.name for t in api.list_repo_refs(repo).tags] == ["v1.0"]


def test_verify_release_downloads_and_checks_every_file(family: Path, api: HfApi, tmp_path: Path) -> None:
    """verify_release downloads the tag and checks it against MANIFEST; a tampered file is caught."""
    from hfrelease.errors import PublishError

    report = _publish(family, api)
    repo = report.plan.repos[0].repo
    directory = verify_release(repo, tag="v1.0", directory=tmp_path / "v", api=api)
    assert (directory / "model.safetensors").read_bytes() == (family / "checkpoints/q0/model.safetensors").read_bytes()
    (directory / "config.json").write_text("{}")
    from huggingface_hub import CommitOperationAdd

    api.create_commit(repo, [CommitOperationAdd("config.json", b"{}")], commit_message="tamper")
    api.delete_tag(repo, tag="v1.0")
    api.create_tag(repo, tag="v1.0")
    with pytest.raises(PublishError, match=r"config\.json: differs from MANIFEST"):
        verify_release(repo, tag="v1.0", directory=tmp_path / "v2", api=api)


def test_staging_branch_name() -> None:
    """Staging branches are namespaced under hfrelease/staging/."""
    assert STAGING_PREFIX == "hfrelease/staging/"


@pytest.mark.slow
def test_hf_cli_downloads_the_release_tag(family: Path, api: HfApi, hub: HubServer, tmp_path: Path) -> None:
    """The real `hf download --revision v1.0` fetches exactly the published files."""
    report = _publish(family, api)
    hf = shutil.which("hf", path=str(Path(sys.executable).parent))
    assert hf is not None
    repo = report.plan.repos[1]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN,
           "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(tmp_path / "hfh")}  # fmt: skip
    done = subprocess.run([hf, "download", repo.repo, "--revision", "v1.0", "--local-dir", str(tmp_path / "d")],
                          env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for item in repo.bundle.files:
        assert (tmp_path / "d" / item.path).read_bytes() == item.read()
