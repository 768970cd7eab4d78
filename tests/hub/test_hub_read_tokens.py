"""Read-only, repo-scoped tokens on the built-in Hub: what the release workflow's eval jobs get for a gated or
private source (`HF_READ_TOKEN`). Such a token reads the private repos it names and every public one; a
private repo it does not name looks missing, as to anyone; it cannot write, create or delete anything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from hfrelease.hub import HubServer, serve
from tests.hub_fixtures import TOKEN

READ = "hf_readonly_0123456789abcdef"
PRIVATE, OTHER = "upstream/Private-1M", "upstream/Other-1M"


@pytest.fixture
def read_hub(tmp_path: Path) -> Iterator[HubServer]:
    server = serve(tmp_path / "hub", tokens=[TOKEN], read_tokens={READ: [PRIVATE]})
    writer = HfApi(endpoint=server.url, token=TOKEN)
    for repo in (PRIVATE, OTHER):
        writer.create_repo(repo, private=True)
        writer.create_commit(repo, [CommitOperationAdd("config.json", b"{}")], commit_message="add")
    writer.create_repo("upstream/Public-1M")
    yield server
    server.shutdown()


def test_a_read_token_reads_its_private_repo_and_public_ones(read_hub: HubServer, tmp_path: Path) -> None:
    reader = HfApi(endpoint=read_hub.url, token=READ)
    assert reader.repo_info(PRIVATE).private is True
    path = hf_hub_download(PRIVATE, "config.json", endpoint=read_hub.url, token=READ, cache_dir=tmp_path / "c")
    assert Path(path).read_bytes() == b"{}"
    assert reader.repo_info("upstream/Public-1M").private is False
    for caller in (reader, HfApi(endpoint=read_hub.url, token=False)):
        with pytest.raises(RepositoryNotFoundError):
            caller.repo_info(OTHER if caller is reader else PRIVATE)


def test_a_read_token_cannot_write(read_hub: HubServer) -> None:
    """A commit, a tag, a new repo, a setting: each refused 403 "read-only", and nothing changed."""
    reader = HfApi(endpoint=read_hub.url, token=READ)
    head = reader.repo_info(PRIVATE).sha
    attempts = {
        "commit": lambda: reader.create_commit(PRIVATE, [CommitOperationAdd("x.txt", b"x")], commit_message="x"),
        "tag": lambda: reader.create_tag(PRIVATE, tag="v1.0"),
        "create": lambda: reader.create_repo("upstream/New-1M"),
        "visibility": lambda: reader.update_repo_settings(PRIVATE, private=False),
    }
    for name, attempt in attempts.items():
        with pytest.raises(HfHubHTTPError) as refused:
            attempt()
        assert refused.value.response.status_code == 403 and "read-only" in str(refused.value), name
    after = reader.repo_info(PRIVATE)
    assert after.sha == head and after.private is True
    assert reader.list_repo_refs(PRIVATE).tags == []
