"""Injected faults, and what huggingface_hub 2.x does about them.

What the client retries (huggingface_hub 2.4.0, `utils/_http.py::http_backoff`): status 408, 429, 500,
502, 503, 504 and timeouts / network / protocol errors, up to 5 retries, sleeping 1, 2, 4, 8, 8 s, or
`Retry-After` + 1 s on a 429. Only some calls go through it: preupload, the LFS batch request, the LFS PUT
(and multipart parts and completion), LFS verify, and paginated listings (tree, commits). The second
metadata HEAD of `hf_hub_download` retries too; a file GET retries only 408/429 and resumes broken
streams.

Not retried, so the error surfaces at once: the commit POST itself (`_send_commit` without
`retry_on_error`; `upload_folder`'s multi-commit pipeline does retry it, at the risk of a duplicate
commit), create_repo, repo_info, refs, tags, branches, paths-info, discussions, collections, whoami.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError

from hfrelease.hub import FaultRule, HubServer, serve


@pytest.mark.slow
def test_429_with_retry_after_is_honoured(api: HfApi, repo: str, hub: HubServer) -> None:
    """A 429 + Retry-After on preupload makes the client wait and retry; the commit then lands."""
    hub.faults.add(FaultRule(endpoint="preupload", status=429, retry_after=0, times=1))
    api.create_commit(repo, [CommitOperationAdd("a.txt", b"a")], commit_message="after 429")
    assert hub.stats()["requests"]["preupload"] == 2
    assert "a.txt" in api.list_repo_files(repo)


@pytest.mark.slow
def test_5xx_on_preupload_is_retried(api: HfApi, repo: str, hub: HubServer) -> None:
    """Two 503s on preupload are retried with backoff (1 s, then 2 s) and the commit succeeds."""
    hub.faults.add(FaultRule(endpoint="preupload", status=503, times=2))
    api.create_commit(repo, [CommitOperationAdd("a.txt", b"a")], commit_message="after 503s")
    assert hub.stats()["requests"]["preupload"] == 3


@pytest.mark.slow
def test_5xx_on_lfs_upload_is_retried(api: HfApi, repo: str, hub: HubServer) -> None:
    """A 500 on the LFS PUT is retried; the content is then stored once and committed."""
    hub.faults.add(FaultRule(endpoint="lfs-upload", status=500, times=1))
    api.create_commit(repo, [CommitOperationAdd("w.safetensors", b"\0" * 1000)], commit_message="weights")
    assert hub.stats()["requests"]["lfs-upload"] == 2
    assert api.get_paths_info(repo, ["w.safetensors"])[0].size == 1000  # type: ignore[union-attr]


def test_5xx_on_commit_is_not_retried(api: HfApi, repo: str, hub: HubServer) -> None:
    """The commit POST is sent once: a 500 surfaces as HfHubHTTPError and nothing is committed."""
    head = api.repo_info(repo).sha
    hub.faults.add(FaultRule(endpoint="commit", status=500, times=1))
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(repo, [CommitOperationAdd("a.txt", b"a")], commit_message="x")
    assert caught.value.response.status_code == 500
    assert hub.stats()["requests"]["commit"] == 1
    assert api.repo_info(repo).sha == head


def test_dropped_connection_after_commit_leaves_the_commit_applied(api: HfApi, repo: str, hub: HubServer) -> None:
    """The server applies the commit, then drops the connection: the client errors but the commit is there."""
    head = api.repo_info(repo).sha
    hub.faults.add(FaultRule(endpoint="commit", drop_connection=True, after=True))
    with pytest.raises(httpx2.RemoteProtocolError):
        api.create_commit(repo, [CommitOperationAdd("landed.txt", b"x")], commit_message="lost answer")
    info = api.repo_info(repo)
    assert info.sha != head
    assert "landed.txt" in api.list_repo_files(repo)


def test_fault_limited_to_one_repo(api: HfApi, repo: str, hub: HubServer) -> None:
    """A rule naming a repo fails every request about that repo and leaves the others alone."""
    broken = api.create_repo("alice/broken").repo_id
    hub.faults.add(FaultRule(repo=broken, status=500, times=None))
    with pytest.raises(HfHubHTTPError) as caught:
        api.repo_info(broken)
    assert caught.value.response.status_code == 500
    assert api.repo_info(repo).id == repo


def test_fault_rules_over_http_only_when_enabled(hub: HubServer, tmp_path: Path, token: str) -> None:
    """POST/GET/DELETE /api/_hfrelease/faults drive the rules; the endpoint does not exist without the flag.

    Plain HTTP, not huggingface_hub's session: hfrelease installs a client factory that retries a 503 on a
    GET (`hfrelease.hub_client`), which would absorb the one planted answer this test looks for."""
    url = f"{hub.url}/api/_hfrelease/faults"
    raw = httpx2.Client()
    added = raw.post(url, json=[{"endpoint": "whoami", "status": 503, "times": 1}])
    assert added.status_code == 200 and added.json()[0]["status"] == 503
    whoami = raw.get(f"{hub.url}/api/whoami-v2", headers={"Authorization": f"Bearer {token}"})
    assert whoami.status_code == 503
    assert raw.get(url).json() == []
    bad = raw.post(url, json={"endpoint": "commit"})
    assert bad.status_code == 400

    with serve(tmp_path / "plain") as plain:
        assert raw.get(f"{plain.url}/api/_hfrelease/faults").status_code == 404
        assert raw.get(f"{plain.url}/api/_hfrelease/stats").status_code == 200
