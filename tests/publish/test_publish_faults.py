"""Publishing under injected Hub faults and concurrent writers: retried, resumed, never half-landed."""

from __future__ import annotations

import shlex
import threading
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from hfrelease.errors import PublishError
from hfrelease.hub import FaultRule, HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import execute_release, plan_release, publish_family
from hfrelease.publish.family import PublishReport
from tests.publish_family import TOKEN, fake_plugin_check, make_family, set_version, write_weights


def _publish(family: Path, api: HfApi, **options: Any) -> PublishReport:
    return publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, **options)


def _state(api: HfApi, repos: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Per repo: main's commit ids and the tags (what all-or-nothing must leave untouched)."""
    state = {}
    for repo in repos:
        commits = [c.commit_id for c in api.list_repo_commits(repo)]
        state[repo] = (commits, {t.name: t.target_commit for t in api.list_repo_refs(repo).tags})
    return state


def _repos(family: Path) -> list[str]:
    return [a.repo for a in load_manifest(family).artifact if a.publish]


@pytest.mark.slow
def test_429_with_retry_after_is_honoured(family: Path, api: HfApi, hub: HubServer) -> None:
    """A 429 + Retry-After on preupload is waited out and the release completes."""
    hub.faults.add(FaultRule(endpoint="preupload", status=429, retry_after=0, times=1))
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    assert hub.stats()["requests"]["preupload"] == 2 * 2 + 1  # staging + main per repo, one retried


@pytest.mark.slow
def test_5xx_on_preupload_and_lfs_upload_are_retried(family: Path, api: HfApi, hub: HubServer) -> None:
    """A 503 on preupload and a 500 on the LFS PUT are retried; each weight file is stored once."""
    hub.faults.add(FaultRule(endpoint="preupload", status=503, times=1))
    hub.faults.add(FaultRule(endpoint="lfs-upload", status=500, times=1))
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    assert hub.stats()["requests"]["lfs-upload"] == 3  # two weight files, one PUT retried
    for repo in _repos(family):
        assert len(list(api.list_repo_commits(repo))) == 2


def test_dropped_connection_after_commits_still_one_commit(family: Path, api: HfApi, hub: HubServer) -> None:
    """Every commit of one repo lands but its answer is lost: still exactly one release commit, tagged."""
    repo = _repos(family)[0]
    hub.faults.add(FaultRule(endpoint="commit", repo=repo, drop_connection=True, after=True, times=None))
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    commits, tags = _state(api, [repo])[repo]
    assert len(commits) == 2 and tags == {"v1.0": commits[0]}


def test_stale_parent_fails_cleanly_and_overwrites_nothing(family: Path, api: HfApi) -> None:
    """Someone commits to main just before the release commit: 412, their commit stays, no tag is made."""
    repos = _repos(family)
    other = HfApi(endpoint=api.endpoint, token=TOKEN)

    class Racing(HfApi):
        raced = False

        def create_commit(self, repo_id: str, operations: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if kwargs.get("revision") == "main" and not Racing.raced:
                Racing.raced = True
                other.create_commit(repo_id, [CommitOperationAdd("theirs.txt", b"x")], commit_message="theirs")
            return super().create_commit(repo_id, operations, **kwargs)

    for repo in repos:
        api.create_repo(repo)
    with pytest.raises(PublishError, match="concurrent change") as caught:
        _publish(family, Racing(endpoint=api.endpoint, token=TOKEN))
    assert "nothing was overwritten" in caught.value.message
    state = _state(api, repos)
    assert "theirs.txt" in api.list_repo_files(repos[0])
    assert all(len(commits) == (2 if r == repos[0] else 1) and not tags for r, (commits, tags) in state.items())


def test_main_moved_after_planning_is_refused_before_any_commit(family: Path, api: HfApi) -> None:
    """A commit on main between plan and execute stops the release before main or tags change anywhere."""
    repos = _repos(family)
    for repo in repos:
        api.create_repo(repo)
    plan = plan_release(publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check,
                                       dry_run=True).bundle, api)  # fmt: skip
    api.create_commit(repos[1], [CommitOperationAdd("theirs.txt", b"x")], commit_message="theirs")
    before = _state(api, repos)
    with pytest.raises(PublishError, match="main moved"):
        execute_release(plan, api)
    assert _state(api, repos) == before


def test_failure_on_third_of_four_repos_changes_nothing_and_rerun_completes(
    tmp_path: Path, api: HfApi, hub: HubServer
) -> None:
    """v1.1 fails staging repo 3 of 4: no main or tag moves; the re-run sends only the never-staged weights."""
    family = make_family(tmp_path / "four", quants=4, weight_bytes=20_000)
    repos = _repos(family)
    _publish(family, api)
    set_version(family, "1.1")
    for number in range(4):
        write_weights(family / "checkpoints" / f"q{number}" / "model.safetensors", 20_000, seed=50 + number)
    before = _state(api, repos)
    hub.faults.add(FaultRule(endpoint="commit", repo=repos[2], status=500, times=None))
    with pytest.raises(PublishError) as caught:
        _publish(family, api)
    assert repos[2] in caught.value.message
    assert "No repo's main branch or tags were changed" in (caught.value.hint or "")
    assert _state(api, repos) == before

    hub.faults.clear()
    hub.reset_stats()
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    # Repos 1-2 were staged and repo 3's weights uploaded before its commit failed: only repo 4's weights
    # cross the wire again, and only repos 3 and 4 get a staging commit (then one commit on each main).
    assert hub.stats()["lfs_bytes_received"] == (family / "checkpoints" / "q3" / "model.safetensors").stat().st_size
    assert hub.stats()["requests"]["commit"] == 2 + 4
    after = _state(api, repos)
    for repo in repos:
        commits, tags = after[repo]
        assert commits[1:] == before[repo][0] and tags == {**before[repo][1], "v1.1": commits[0]}


def test_existing_tag_on_other_content_is_refused(family: Path, api: HfApi) -> None:
    """Changing files without bumping the version: tag v1.0 exists elsewhere, so nothing is pushed."""
    _publish(family, api)
    repos = _repos(family)
    before = _state(api, repos)
    (family / "q0" / "README.md").write_text("# edited after release\n")
    with pytest.raises(PublishError, match=r"tag v1\.0 already exists on other content") as caught:
        _publish(family, api)
    assert "bump `version`" in (caught.value.hint or "")
    assert _state(api, repos) == before


def test_two_publishes_of_one_version_at_once(family: Path, api: HfApi) -> None:
    """Two runs race: one commit per repo, tagged; per repo, one run published it, the other says 'already'."""
    repos = _repos(family)
    start = threading.Barrier(2)
    reports: list[PublishReport] = []

    def run() -> None:
        start.wait()
        reports.append(_publish(family, HfApi(endpoint=api.endpoint, token=TOKEN)))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(reports) == 2
    for repo in repos:
        commits, tags = _state(api, [repo])[repo]
        assert len(commits) == 2 and tags == {"v1.0": commits[0]}
        statuses = sorted(o.status for r in reports if r.outcome for o in r.outcome.repos if o.repo == repo)
        assert statuses == ["already-published", "published"]
    assert any(r.outcome and "already published" in r.outcome.message for r in reports)


def test_failure_promoting_third_of_four_names_each_state_and_the_command_that_resumes(
    tmp_path: Path, api: HfApi, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main's commit of repo 3 of 4 fails: the error lists every repo's state; its command finishes the job."""
    family = make_family(tmp_path / "four", quants=4, weight_bytes=20_000)
    repos = _repos(family)
    hub.faults.add(FaultRule(endpoint="commit", repo=repos[2], revision="main", status=500, times=None))
    with pytest.raises(PublishError) as caught:
        _publish(family, api)
    message, hint = caught.value.message, caught.value.hint or ""
    assert f"publishing {repos[2]} failed after every repo was staged" in message
    lines = {line.split(": ", 1)[0].strip(" -"): line for line in message.splitlines() if line.startswith("  - ")}
    assert set(lines) == set(repos)
    for repo in repos[:2]:
        head = api.list_repo_commits(repo)[0].commit_id
        assert f"released: main at {head[:12]}, tagged v1.0" in lines[repo]
    assert "FAILED HERE, staged at hfrelease/staging/v1.0" in lines[repos[2]]
    assert "main untouched" in lines[repos[2]] and "FAILED" not in lines[repos[3]]
    assert "staged at hfrelease/staging/v1.0" in lines[repos[3]]
    command = shlex.split(hint[hint.index("`") + 1 : hint.rindex("`")])
    assert command == ["hfrelease", "publish", str(family), "--hub", api.endpoint]

    # The command's own path: the manifest and Hub it names, the token found the usual way.
    hub.faults.clear()
    hub.reset_stats()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    report = publish_family(load_manifest(Path(command[2])), hub=command[4], plugin_checker=fake_plugin_check)
    assert report.outcome is not None and report.outcome.status == "published"
    statuses = {o.repo: o.status for o in report.outcome.repos}
    assert [statuses[repo] for repo in repos] == ["already-published"] * 2 + ["published"] * 2
    stats = hub.stats()
    # Only the two mains left are committed (what was staged is reused: no staging commit, no bytes).
    assert stats["requests"]["commit"] == 2 and stats["requests"]["tag-create"] == 2
    assert stats["lfs_bytes_received"] == 0
    for repo, (commits, tags) in _state(api, repos).items():
        assert len(commits) == 2 and tags == {"v1.0": commits[0]}, repo  # one release commit, tagged once
        assert [b.name for b in api.list_repo_refs(repo).branches] == ["main"]


def test_pull_requests_of_a_pr_run_are_closed_when_the_release_is_published(
    family: Path, api: HfApi, hub: HubServer
) -> None:
    """After --pr, publishing reuses each pull request as staged, then closes it naming main's release commit."""
    _publish(family, api, pr=True)
    repos = _repos(family)
    # Closing the first repo's pull request fails once: the release completes and the next run closes it.
    hub.faults.add(FaultRule(endpoint="discussion-status", repo=repos[0], status=500, times=None))
    hub.reset_stats()
    report = _publish(family, api)
    assert report.outcome is not None and report.outcome.status == "published"
    assert hub.stats()["lfs_bytes_received"] == 0
    assert "branch-create" not in hub.stats()["requests"]  # the pull request was the staging
    assert report.plan.repos[0].action == "commit, tag, close PR #1"
    assert api.get_discussion_details(repos[0], 1).status == "open"
    hub.faults.clear()
    again = _publish(family, api)
    assert again.outcome is not None and again.outcome.status == "already-published"
    for repo, (commits, tags) in _state(api, repos).items():
        assert len(commits) == 2 and tags == {"v1.0": commits[0]}
        details = api.get_discussion_details(repo, 1)
        assert details.status == "closed"
        assert any(commits[0] in getattr(event, "content", "") for event in details.events)
        assert [(d.num, d.status) for d in api.get_repo_discussions(repo)] == [(1, "closed")]
