"""State lives in files: it survives restarts, and an interrupted commit leaves no trace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download

from hfrelease.hub import serve
from hfrelease.hub.repo_state import AddFile, RepoRef, regular_entry
from hfrelease.hub.storage import HubStorage


def test_restart_keeps_repos_refs_prs_and_collections(tmp_path: Path, token: str) -> None:
    """Everything written before a restart reads back the same from a new server on the same root."""
    root, weights = tmp_path / "hub", os.urandom(3000)
    with serve(root, tokens=[token]) as first:
        api = HfApi(endpoint=first.url, token=token)
        repo = api.create_repo("alice/durable", private=True).repo_id
        commit = api.create_commit(
            repo, [CommitOperationAdd("model.safetensors", weights), CommitOperationAdd("card.md", b"c")],
            commit_message="publish",
        )  # fmt: skip
        api.create_tag(repo, tag="v1")
        api.create_commit(repo, [CommitOperationAdd("pr.txt", b"p")], commit_message="pr", create_pr=True)
        slug = api.create_collection("durable").slug
        api.add_collection_item(slug, item_id=repo, item_type="model")

    with serve(root, tokens=[token]) as second:
        api = HfApi(endpoint=second.url, token=token)
        assert api.repo_info(repo).sha == commit.oid and api.repo_info(repo).private
        assert [t.target_commit for t in api.list_repo_refs(repo).tags] == [commit.oid]
        assert [d.num for d in api.get_repo_discussions(repo)] == [1]
        assert [i.item_id for i in api.get_collection(slug).items] == [repo]
        local = hf_hub_download(repo, "model.safetensors", revision="v1", endpoint=second.url, token=token,
                                cache_dir=tmp_path / "cache")  # fmt: skip
        assert Path(local).read_bytes() == weights


def test_interrupted_commit_is_invisible(tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the process dies before the ref moves, the commit never happened, before and after a restart."""
    root = tmp_path / "hub"
    with serve(root, tokens=[token]) as hub:
        api = HfApi(endpoint=hub.url, token=token)
        repo = api.create_repo("alice/atomic").repo_id
        head = api.repo_info(repo).sha

    storage = HubStorage(root)
    ref = RepoRef("model", repo)

    def crash(state: object) -> None:
        raise OSError("simulated power loss before the ref moved")

    monkeypatch.setattr(storage, "save", crash)
    content = b"half-written"
    entry = regular_entry(content, storage.objects.put_bytes(content))
    with pytest.raises(OSError, match="power loss"):
        storage.commit(ref, "main", [AddFile("x.txt", entry)], title="t", message="", author="a",
                       parent_commit=None, create_pr=False)  # fmt: skip

    with serve(root, tokens=[token]) as hub:
        api = HfApi(endpoint=hub.url, token=token)
        assert api.repo_info(repo).sha == head
        assert api.list_repo_files(repo) == [".gitattributes"]
        api.create_commit(repo, [CommitOperationAdd("y.txt", b"y")], commit_message="still works", parent_commit=head)
