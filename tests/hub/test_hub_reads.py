"""Reading from the Hub server: listings, downloads, the `hf` CLI, and huggingface_hub's error types."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, get_session, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from hfrelease.hub import HubServer, serve


@pytest.fixture
def populated(api: HfApi, repo: str) -> str:
    files = {"config.json": b"{}", "a/b/c.txt": b"c", "a/d.txt": b"d", "model.safetensors": b"\0" * 64}
    api.create_commit(repo, [CommitOperationAdd(p, c) for p, c in files.items()], commit_message="files")
    return repo


def test_tree_listing_recursive_and_by_folder(api: HfApi, populated: str) -> None:
    """list_repo_tree lists one level or everything (files and folders); a missing folder is EntryNotFound."""
    top = {e.path for e in api.list_repo_tree(populated)}
    assert top == {".gitattributes", "config.json", "a", "model.safetensors"}
    assert {e.path for e in api.list_repo_tree(populated, path_in_repo="a")} == {"a/b", "a/d.txt"}
    everything = {e.path for e in api.list_repo_tree(populated, recursive=True)}
    assert {"a", "a/b", "a/b/c.txt", "a/d.txt"} <= everything
    expanded = list(api.list_repo_tree(populated, recursive=True, expand=True))
    assert all(e.last_commit is not None for e in expanded)
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree(populated, path_in_repo="nope"))


def test_tree_pagination_is_followed_by_the_client(tmp_path: Path, token: str) -> None:
    """With 3 entries per page the client follows `Link: rel=next` and still sees every file."""
    with serve(tmp_path / "paged", tokens=[token], tree_page_size=3) as hub:
        api = HfApi(endpoint=hub.url, token=token)
        repo = api.create_repo("alice/many").repo_id
        api.create_commit(repo, [CommitOperationAdd(f"f{i:02}.txt", b"x") for i in range(10)], commit_message="m")
        assert len(api.list_repo_files(repo)) == 11
        assert hub.stats()["requests"]["tree"] == 4


def test_paths_info(api: HfApi, populated: str) -> None:
    """get_paths_info answers files and folders and skips paths that do not exist."""
    info = {i.path: i for i in api.get_paths_info(populated, ["config.json", "a", "missing", "model.safetensors"])}
    assert set(info) == {"config.json", "a", "model.safetensors"}
    assert info["model.safetensors"].lfs is not None  # type: ignore[union-attr]
    assert info["model.safetensors"].size == 64  # type: ignore[union-attr]


def test_errors_map_to_huggingface_hub_exceptions(api: HfApi, populated: str, hub: HubServer, tmp_path: Path) -> None:
    """Missing repo, revision and file raise the client's own exception types."""
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info("alice/does-not-exist")
    with pytest.raises(RevisionNotFoundError):
        api.repo_info(populated, revision="v9.9")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(populated, "nope.txt", endpoint=hub.url, cache_dir=tmp_path)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(populated, "config.json", revision="nope", endpoint=hub.url, cache_dir=tmp_path)
    escape = get_session().get(f"{hub.url}/api/models/%2E%2E/%2E%2E")  # names never reach the filesystem raw
    assert escape.status_code == 404 and escape.headers["X-Error-Code"] == "RepoNotFound"
    assert api.file_exists(populated, "a/d.txt") and not api.file_exists(populated, "a/x.txt")
    assert api.repo_exists(populated) and not api.repo_exists("alice/none")


def test_resolve_headers_and_ranges(api: HfApi, populated: str, hub: HubServer) -> None:
    """HEAD/GET resolve carry X-Repo-Commit, ETag and (for LFS) X-Linked-*; ranges answer 206."""
    sha = api.repo_info(populated).sha
    head = get_session().head(f"{hub.url}/{populated}/resolve/main/model.safetensors")
    assert head.status_code == 200
    assert head.headers["X-Repo-Commit"] == sha
    assert head.headers["X-Linked-Size"] == head.headers["Content-Length"] == "64"
    assert head.headers["ETag"] == head.headers["X-Linked-Etag"]
    part = get_session().get(f"{hub.url}/{populated}/resolve/{sha}/config.json", headers={"Range": "bytes=1-"})
    assert part.status_code == 206 and part.content == b"}"
    assert part.headers["Content-Range"] == "bytes 1-1/2"


@pytest.mark.slow
def test_hf_cli_downloads_a_tag(api: HfApi, populated: str, tmp_path: Path, cli_env: dict[str, str]) -> None:
    """`hf download REPO --revision TAG --local-dir D` (real CLI, HF_ENDPOINT + HF_TOKEN) gets the tag."""
    api.create_tag(populated, tag="v1")
    api.create_commit(populated, [CommitOperationAdd("later.txt", b"after the tag")], commit_message="later")
    hf = shutil.which("hf", path=str(Path(sys.executable).parent))
    assert hf is not None, "the `hf` CLI comes with huggingface_hub[cli]"
    target = tmp_path / "download"
    done = subprocess.run(
        [hf, "download", populated, "--revision", "v1", "--local-dir", str(target)],
        env=cli_env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (target / "a" / "b" / "c.txt").read_bytes() == b"c"
    assert (target / "model.safetensors").read_bytes() == b"\0" * 64
    assert not (target / "later.txt").exists()


def test_model_page_without_a_readme_is_a_page_listing_the_files(hub: HubServer, populated: str) -> None:
    """A repo with no README.md still has a page (HTML, 200): it says there is no card and links each file;
    a repo that does not exist stays a 404."""
    page = get_session().get(f"{hub.url}/{populated}")
    assert page.status_code == 200, page.text
    assert page.headers["Content-Type"].startswith("text/html")
    sha = page.headers["X-Repo-Commit"]
    assert "no model card" in page.text
    for path in ("config.json", "a/b/c.txt", "model.safetensors"):
        assert f'href="/{populated}/resolve/{sha}/{path}"' in page.text
    assert get_session().get(f"{hub.url}/{populated}/resolve/{sha}/a/b/c.txt").content == b"c"
    assert get_session().get(f"{hub.url}/alice/nothing-here").status_code == 404
