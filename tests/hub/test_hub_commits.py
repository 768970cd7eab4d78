"""Writing through the Hub server with huggingface_hub's real client: commits, refs, pull requests."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    get_session,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

from hfrelease.hub import HubServer

# Larger than the Hub's 10 MiB inline limit: preupload answers "lfs" because of the size alone.
BIG = 10 * 1024 * 1024 + 17


def _files(api: HfApi, repo: str, revision: str = "main") -> set[str]:
    return set(api.list_repo_files(repo, revision=revision))


def test_round_trip_is_byte_identical(api: HfApi, repo: str, hub: HubServer, tmp_path: Path) -> None:
    """Regular, pattern-LFS and size-LFS files come back byte for byte, through both upload paths."""
    contents = {
        "config.json": b'{"architectures": ["LlamaForCausalLM"]}\n',
        "model.safetensors": os.urandom(4096),  # LFS by .gitattributes pattern
        "shards/big.dat": os.urandom(BIG),  # LFS by size
        "README.md": b"---\nlicense: apache-2.0\n---\n# Card\n",
    }
    api.create_commit(repo, [CommitOperationAdd(p, c) for p, c in contents.items()], commit_message="publish")

    stats = hub.stats()
    assert stats["requests"]["lfs-upload"] == 2
    assert stats["lfs_bytes_received"] == 4096 + BIG
    assert _files(api, repo) == {".gitattributes", *contents}
    for path, content in contents.items():
        local = hf_hub_download(repo, path, endpoint=hub.url, token=api.token, cache_dir=tmp_path / "cache")
        assert Path(local).read_bytes() == content, path
    lfs = {f.path: f.lfs for f in api.list_repo_tree(repo, recursive=True) if hasattr(f, "lfs")}
    assert lfs["model.safetensors"] is not None
    assert lfs["model.safetensors"].sha256 == hashlib.sha256(contents["model.safetensors"]).hexdigest()
    assert lfs["config.json"] is None


def test_commit_deletes_files_and_folders(api: HfApi, repo: str) -> None:
    """CommitOperationDelete removes a file or a whole folder; deleting a missing file is EntryNotFound."""
    adds = [CommitOperationAdd(p, b"x") for p in ("keep.txt", "old.txt", "logs/a.txt", "logs/b/c.txt")]
    api.create_commit(repo, adds, commit_message="add")
    deletes = [CommitOperationDelete("old.txt"), CommitOperationDelete("logs/")]
    api.create_commit(repo, deletes, commit_message="clean")
    assert _files(api, repo) == {".gitattributes", "keep.txt"}
    with pytest.raises(EntryNotFoundError):
        api.create_commit(repo, [CommitOperationDelete("missing.txt")], commit_message="nope")


def test_stale_parent_commit_is_refused_and_nothing_is_overwritten(api: HfApi, repo: str) -> None:
    """A parent_commit that is no longer the branch head gets the Hub's 412; the newer commit stays."""
    first = api.create_commit(repo, [CommitOperationAdd("card.md", b"v1")], commit_message="v1")
    second = api.create_commit(
        repo, [CommitOperationAdd("card.md", b"v2")], commit_message="v2", parent_commit=first.oid
    )
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(repo, [CommitOperationAdd("card.md", b"v3")], commit_message="v3", parent_commit=first.oid)
    assert caught.value.response.status_code == 412
    assert "A commit has happened since" in str(caught.value)
    assert api.repo_info(repo).sha == second.oid
    url = f"{api.endpoint}/{repo}/resolve/main/card.md"
    assert get_session().get(url).content == b"v2"


def test_commit_is_all_or_nothing(api: HfApi, repo: str, hub: HubServer, token: str) -> None:
    """A commit with one bad operation (LFS pointer to content never uploaded) changes nothing."""
    head = api.repo_info(repo).sha
    lines = [
        {"key": "header", "value": {"summary": "half", "description": ""}},
        {"key": "file", "value": {"path": "good.txt", "content": "aGk=", "encoding": "base64"}},
        {"key": "lfsFile", "value": {"path": "w.safetensors", "algo": "sha256", "oid": "0" * 64, "size": 5}},
    ]
    response = get_session().post(
        f"{hub.url}/api/models/{repo}/commit/main",
        content=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 400
    assert response.headers["X-Request-Id"]
    assert "LFS pointer" in response.json()["error"]
    assert api.repo_info(repo).sha == head
    assert _files(api, repo) == {".gitattributes"}


def test_reupload_of_identical_content_sends_no_file_bytes(api: HfApi, repo: str, hub: HubServer) -> None:
    """Re-publishing the same files costs no LFS upload and no inline bytes: preupload/batch say 'have it'."""
    weights, card = os.urandom(2048), b"# card\n"
    ops = [CommitOperationAdd("model.safetensors", weights), CommitOperationAdd("card.md", card)]
    api.create_commit(repo, ops, commit_message="publish")
    hub.reset_stats()

    ops = [CommitOperationAdd("model.safetensors", weights), CommitOperationAdd("card.md", card)]
    api.create_commit(repo, ops, commit_message="publish again")
    assert hub.stats()["file_bytes_received"] == 0
    assert "lfs-upload" not in hub.stats()["requests"]

    # Same bytes under a new name (another repo's shard, a renamed file): still nothing sent.
    api.create_commit(repo, [CommitOperationAdd("copy.safetensors", weights)], commit_message="copy")
    assert hub.stats()["lfs_bytes_received"] == 0


def test_tags_and_branches(api: HfApi, repo: str, hub: HubServer, tmp_path: Path) -> None:
    """Tags pin a commit (snapshot_download of the tag ignores later commits); branches take commits."""
    v1 = api.create_commit(repo, [CommitOperationAdd("w.bin", b"\0v1")], commit_message="v1")
    api.create_tag(repo, tag="v1.0", tag_message="first release")
    api.create_commit(repo, [CommitOperationAdd("w.bin", b"\0v2")], commit_message="v2")
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_tag(repo, tag="v1.0")
    assert caught.value.response.status_code == 409

    refs = api.list_repo_refs(repo)
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1.0", v1.oid)]
    snapshot = snapshot_download(repo, revision="v1.0", endpoint=hub.url, cache_dir=tmp_path / "cache")
    assert (Path(snapshot) / "w.bin").read_bytes() == b"\0v1"

    api.create_branch(repo, branch="staging", revision="v1.0")
    api.create_commit(repo, [CommitOperationAdd("s.txt", b"s")], commit_message="on staging", revision="staging")
    assert "s.txt" in _files(api, repo, "staging")
    assert "s.txt" not in _files(api, repo)
    api.delete_branch(repo, branch="staging")
    api.delete_tag(repo, tag="v1.0")
    refs = api.list_repo_refs(repo)
    assert [b.name for b in refs.branches] == ["main"]
    assert refs.tags == []


def test_pull_requests(api: HfApi, repo: str) -> None:
    """create_pull_request + commit to refs/pr/N, and create_commit(create_pr=True), both merge into main."""
    draft = api.create_pull_request(repo, title="Add eval results")
    assert draft.is_pull_request and draft.status == "draft" and draft.git_reference == "refs/pr/1"
    api.create_commit(repo, [CommitOperationAdd("results.json", b"{}")], commit_message="r", revision="refs/pr/1")

    via_commit = api.create_commit(repo, [CommitOperationAdd("card.md", b"c")], commit_message="card", create_pr=True)
    assert via_commit.pr_num == 2 and via_commit.pr_revision == "refs/pr/2"
    assert _files(api, repo) == {".gitattributes"}

    api.merge_pull_request(repo, 1)
    api.merge_pull_request(repo, 2)
    assert _files(api, repo) == {".gitattributes", "results.json", "card.md"}
    details = api.get_discussion_details(repo, 2)
    assert details.status == "merged" and details.merge_commit_oid is not None
    assert [(d.num, d.status) for d in api.get_repo_discussions(repo)] == [(2, "merged"), (1, "merged")]
    prs = api.list_repo_refs(repo, include_pull_requests=True).pull_requests
    assert prs is not None and [p.ref for p in prs] == ["refs/pr/1", "refs/pr/2"]


def test_collections(api: HfApi, repo: str) -> None:
    """A collection is created, takes an existing repo, and reads back; a missing repo is refused."""
    collection = api.create_collection("Nanbeige4.2-3B quants", description="FP8 and NVFP4")
    collection = api.add_collection_item(collection.slug, item_id=repo, item_type="model", note="FP8-Dynamic")
    again = api.get_collection(collection.slug)
    assert [(i.item_id, i.item_type, i.note) for i in again.items] == [(repo, "model", "FP8-Dynamic")]
    assert api.create_collection("Nanbeige4.2-3B quants", exists_ok=True).slug == collection.slug
    with pytest.raises(HfHubHTTPError) as caught:
        api.add_collection_item(collection.slug, item_id="alice/nope", item_type="model")
    assert caught.value.response.status_code == 404


def test_list_collections_has_the_hubs_shape(api: HfApi, anonymous: HfApi) -> None:
    """HfApi.list_collections parses the listing: filtered by owner and item, items cut to 4, private hidden."""
    repos = [api.create_repo(f"alice/quant-{n}").repo_id for n in range(5)]
    family = api.create_collection("family", namespace="alice")
    for repo in repos:
        api.add_collection_item(family.slug, item_id=repo, item_type="model")
    other = api.create_collection("other", namespace="alice")
    api.create_collection("hidden", namespace="alice", private=True)
    listed = list(api.list_collections(owner="alice"))
    assert [(c.slug, c.position) for c in listed] == [(family.slug, 0), (other.slug, 1), (listed[2].slug, 2)]
    assert [i.item_id for i in listed[0].items] == repos[:4]  # the Hub lists at most 4 items per collection
    assert [c.slug for c in api.list_collections(item=f"models/{repos[4]}")] == [family.slug]
    assert [c.slug for c in api.list_collections(owner="bob")] == []
    assert [c.title for c in anonymous.list_collections(owner="alice")] == ["family", "other"]
    assert len(api.get_collection(family.slug).items) == 5
