"""Who may read and write, and that no token ever shows up in what the server prints or logs."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, get_session, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from hfrelease.hub import HubServer, serve


def test_write_without_token_is_401(anonymous: HfApi, repo: str) -> None:
    """Creating a repo or committing anonymously is refused with 401, as an HfHubHTTPError."""
    with pytest.raises(HfHubHTTPError) as caught:
        anonymous.create_repo("alice/sneaky")
    assert caught.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as caught:
        anonymous.create_commit(repo, [CommitOperationAdd("x.txt", b"x")], commit_message="anonymous")
    assert caught.value.response.status_code == 401
    assert caught.value.response.headers["X-Request-Id"]


def test_unknown_token_is_401_not_repo_not_found(hub: HubServer, repo: str) -> None:
    """A token the server was not given is refused with the message the client reads as 'bad credentials'."""
    stranger = HfApi(endpoint=hub.url, token="hf_not_a_token_of_this_server")
    with pytest.raises(HfHubHTTPError) as caught:
        stranger.repo_info(repo)
    assert caught.value.response.status_code == 401
    assert not isinstance(caught.value, RepositoryNotFoundError)


def test_public_reads_are_anonymous_private_ones_are_not(
    api: HfApi, anonymous: HfApi, hub: HubServer, tmp_path: Path
) -> None:
    """Anyone reads a public repo; a private repo looks missing (RepositoryNotFoundError) without a token."""
    public = api.create_repo("alice/public").repo_id
    private = api.create_repo("alice/private", private=True).repo_id
    for repo_id in (public, private):
        api.create_commit(repo_id, [CommitOperationAdd("card.md", b"hi")], commit_message="card")
    path = hf_hub_download(public, "card.md", endpoint=hub.url, token=False, cache_dir=tmp_path / "a")
    assert Path(path).read_bytes() == b"hi"
    with pytest.raises(RepositoryNotFoundError):
        anonymous.repo_info(private)
    assert api.repo_info(private).private is True


def test_token_stays_out_of_logs(
    api: HfApi, repo: str, hub: HubServer, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither the server's token nor a rejected one appears in any log record, whatever the outcome."""
    caplog.set_level(logging.DEBUG)
    rejected = "hf_rejected_token_value_42"
    api.create_commit(repo, [CommitOperationAdd("model.safetensors", b"\0" * 32)], commit_message="w")
    get_session().get(f"{hub.url}/api/whoami-v2", headers={"Authorization": f"Bearer {rejected}"})
    get_session().get(f"{hub.url}/api/models/{repo}/tree/main?token={rejected}")
    # Only the server's records: the client's own httpx logger does print the URL it requested.
    server_log = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("hfrelease"))
    assert "GET /api/whoami-v2 -> 401" in server_log
    assert token not in server_log
    assert rejected not in server_log


def test_generated_token_file_is_private_and_survives_restart(tmp_path: Path) -> None:
    """Without --token the server makes one, stores it with mode 0600, and reuses it on the next start."""
    root = tmp_path / "hub"
    with serve(root) as first:
        assert first.token_file is not None
        assert stat.S_IMODE(first.token_file.stat().st_mode) == 0o600
        token = first.token_file.read_text().strip()
        HfApi(endpoint=first.url, token=token).create_repo("alice/kept")
    with serve(root) as second:
        assert second.token_file is not None and second.token_file.read_text().strip() == token
        assert HfApi(endpoint=second.url, token=token).repo_exists("alice/kept")


@pytest.mark.slow
def test_command_line_server_never_prints_its_token(tmp_path: Path) -> None:
    """`python -m hfrelease.hub` announces the token file's path, and its whole output never holds the token."""
    root = tmp_path / "hub"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "hfrelease.hub", "--root", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        banner: list[str] = []
        while True:  # the banner ends with the token file's line; EOF means the server died
            banner.append(process.stdout.readline())
            if not banner[-1] or "Write token stored in" in banner[-1]:
                break
        url = next(line.split("=", 1)[1].strip() for line in banner if line.startswith("HF_ENDPOINT="))
        token = (root / "token").read_text().strip()
        assert str(root / "token") in banner[-1]
        assert any(line.startswith("HF_HUB_DISABLE_XET=1 is needed") for line in banner)  # no Xet here
        api = HfApi(endpoint=url, token=token)
        api.create_repo("alice/cli")
        api.create_commit("alice/cli", [CommitOperationAdd("a.txt", b"a")], commit_message="a")
        get_session().get(f"{url}/api/whoami-v2", headers={"Authorization": "Bearer hf_wrong"})
        time.sleep(0.2)  # let the access log of the last request reach the pipe
    finally:
        process.terminate()
        output = "".join(banner) + process.communicate(timeout=10)[0]
    assert "POST /api/models/alice/cli/commit/main -> 200" in output
    assert token not in output
    assert "hf_wrong" not in output
