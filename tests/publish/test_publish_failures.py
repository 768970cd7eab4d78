"""Hub failures through the `hfrelease publish` command: each is exit 7 with what to do, never "a bug" (exit 1).

The built-in Hub's fault injection (hfrelease/hub/faults.py) makes the Hub answer 401/403/429/5xx, drop a
connection, or lose the reply to a write it made, on cue.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from huggingface_hub import HfApi

from hfrelease.errors import ExitCode, PublishError
from hfrelease.hub import FaultRule, HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from tests.conftest import CliRun
from tests.publish_family import TOKEN, fake_plugin_check

BUG = "This is a bug in hfrelease"


def _publish(cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch,
             token: str = TOKEN) -> tuple[int, str, str]:  # fmt: skip
    monkeypatch.setenv("HF_TOKEN", token)
    return cli(["publish", str(family), "--hub", hub.url])


def _repos(family: Path) -> list[str]:
    return [a.repo for a in load_manifest(family).artifact if a.publish]


def _tags(api: HfApi, repo: str) -> dict[str, str]:
    return {t.name: t.target_commit for t in api.list_repo_refs(repo).tags}


def test_wrong_token_is_exit_7_saying_check_the_scope(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token the Hub refuses (401) ends the plan with exit 7 and "check the token's scope"."""
    code, _, err = _publish(cli, family, hub, monkeypatch, token="hf_wrong_0123456789abcdef")
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "HTTP 401" in err and "check the token's scope" in err and BUG not in err


def test_forbidden_write_is_exit_7_saying_check_the_scope(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only token (403 on the staging commit) is exit 7 with the scope hint; no main or tag moves."""
    hub.faults.add(FaultRule(endpoint="commit", status=403, times=None))
    code, _, err = _publish(cli, family, hub, monkeypatch)
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "HTTP 403" in err and "check the token's scope" in err and BUG not in err
    assert "No repo's main branch or tags were changed" in " ".join(err.split())


def test_429_on_a_planning_read_names_the_endpoint(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """429 on every repo-info read (after huggingface_hub's retries) is exit 7 naming the request."""
    hub.faults.add(FaultRule(endpoint="repo-info", status=429, retry_after=0, times=None))
    code, _, err = _publish(cli, family, hub, monkeypatch)
    text = " ".join(err.split())
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "429 Too Many Requests" in text and f"GET {hub.url}/api/models/{_repos(family)[0]}" in text
    assert "planning v1.0" in text and BUG not in text


def test_5xx_on_a_write_names_the_endpoint(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 500 on every branch creation is exit 7 naming POST .../branch/...; nothing on main moves."""
    hub.faults.add(FaultRule(endpoint="branch-create", status=500, times=None))
    code, _, err = _publish(cli, family, hub, monkeypatch)
    text = " ".join(err.split())
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "HTTP 500" in text and f"POST {hub.url}/api/models/{_repos(family)[0]}/branch/" in text
    assert BUG not in text


def test_no_answer_from_the_hub_is_exit_7(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections dropped without an answer on the plan's reads: exit 7, "no answer from" the Hub."""
    hub.faults.add(FaultRule(endpoint="repo-info", drop_connection=True, times=None))
    code, _, err = _publish(cli, family, hub, monkeypatch)
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "no answer from" in err and BUG not in err


def test_hub_without_collections_publishes_then_a_rerun_makes_the_collection(
    cli: CliRun, family: Path, hub: HubServer, api: HfApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """404 on POST /api/collections after every repo is tagged (a Hub without collections): the release
    stands, exit 0 with a warning naming the setting (issue 28, part 7; it was exit 7); the re-run (the Hub
    now has collections) makes the collection with every repo, and commits nothing again."""
    hub.faults.add(FaultRule(endpoint="collection-create", status=404, times=None))
    code, _, err = _publish(cli, family, hub, monkeypatch)
    text = " ".join(err.split())
    assert code == ExitCode.OK, err
    assert "warning: collection 'Tiny family' not made, this Hub has no collections" in text
    assert "/api/collections" in text and "remove `collection` from [publish]" in text and BUG not in text
    for repo in _repos(family):
        assert "v1.0" in _tags(api, repo)

    hub.faults.clear()
    hub.reset_stats()
    code, _, err = _publish(cli, family, hub, monkeypatch)
    assert code == ExitCode.OK, err
    assert "already published" in err
    assert "commit" not in hub.stats()["requests"]
    collections = list(api.list_collections(owner="alice"))
    assert [c.title for c in collections] == ["Tiny family"]
    items = api.get_collection(collections[0].slug).items
    assert sorted(i.item_id for i in items) == sorted(_repos(family))


def test_lost_tag_reply_is_read_back_as_tagged(family: Path, api: HfApi, hub: HubServer) -> None:
    """The Hub makes the tag but the reply is lost: the tag is read back, the release completes, one tag."""
    repo = _repos(family)[0]
    hub.faults.add(FaultRule(endpoint="tag-create", repo=repo, drop_connection=True, after=True, times=None))
    report = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check)
    assert report.outcome is not None and report.outcome.status == "published"
    head = api.list_repo_commits(repo)[0].commit_id
    assert _tags(api, repo) == {"v1.0": head}
    assert hub.stats()["requests"]["tag-create"] == 2  # one per repo: the lost one was not sent again


def test_state_report_after_a_lost_reply_comes_from_the_hub(family: Path, api: HfApi, hub: HubServer) -> None:
    """Tag made, reply lost, and the refs unreadable just then: the failure's state report reads the Hub
    back and says the repo is tagged, not "not tagged yet". A client fails the one read (no server fault
    rule can skip the plan's own earlier read of the same refs)."""
    repo = _repos(family)[0]
    hub.faults.add(FaultRule(endpoint="tag-create", repo=repo, drop_connection=True, after=True, times=1))

    class RefsFailOnceAfterTagging(HfApi):
        tagged = False

        def create_tag(self, repo_id: str, **kwargs: Any) -> Any:
            RefsFailOnceAfterTagging.tagged = True
            return super().create_tag(repo_id, **kwargs)

        def list_repo_refs(self, repo_id: str, **kwargs: Any) -> Any:
            if RefsFailOnceAfterTagging.tagged:
                RefsFailOnceAfterTagging.tagged = False
                raise httpx2.ReadTimeout("read timed out")
            return super().list_repo_refs(repo_id, **kwargs)

    client = RefsFailOnceAfterTagging(endpoint=api.endpoint, token=TOKEN)
    with pytest.raises(PublishError) as caught:
        publish_family(load_manifest(family), api=client, plugin_checker=fake_plugin_check)
    lines = {line.split(": ", 1)[0].strip(" -"): line for line in caught.value.message.splitlines()
             if line.startswith("  - ")}  # fmt: skip
    head = api.list_repo_commits(repo)[0].commit_id
    assert f"released: main at {head[:12]}, tagged v1.0" in lines[repo]
    assert "not tagged yet" not in caught.value.message
    assert "(read back from the Hub)" in caught.value.message

    again = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check)
    assert again.outcome is not None
    assert {o.repo: o.status for o in again.outcome.repos}[repo] == "already-published"
    assert _tags(api, repo) == {"v1.0": head}


def test_a_5xx_read_is_retried_then_reported_within_bounds(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A permanent 503 on the plan's reads ends in exit 7 naming the request, after a bounded wait."""
    hub.faults.add(FaultRule(endpoint="repo-info", status=503, times=None))
    started = time.monotonic()
    code, _, err = _publish(cli, family, hub, monkeypatch)
    assert code == ExitCode.PUBLISH_FAILED, err
    assert "HTTP 503" in err and "/revision/main" in err and BUG not in err
    assert time.monotonic() - started < 120
