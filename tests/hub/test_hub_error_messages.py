"""What the user is told of a Hub's error answer: the server's own message, and for a client with Xet on
against the built-in Hub (which has no Xet storage) what to set."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub.constants
import pytest
from huggingface_hub import HfApi, get_session

from hfrelease.errors import ExitCode, HubError
from hfrelease.hub import HubServer
from hfrelease.hub_errors import hub_errors
from hfrelease.stages.runner import failure_of


def test_the_xet_token_answer_says_what_to_do(hub: HubServer, repo: str) -> None:
    """The 501 to a Xet token request carries, in its body and X-Error-Message, the variable to set."""
    answer = get_session().get(f"{hub.url}/api/models/{repo}/xet-write-token/main")
    assert answer.status_code == 501
    assert "HF_HUB_DISABLE_XET=1" in json.loads(answer.text)["error"]
    assert "HF_HUB_DISABLE_XET=1" in answer.headers["X-Error-Message"]


def test_an_upload_with_xet_on_says_to_set_hf_hub_disable_xet(api: HfApi, repo: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """hf_xet shows only "501 Not Implemented" on xet-write-token; hfrelease says it is a Hub failure (exit 7,
    never "a bug") naming the request, and that HF_HUB_DISABLE_XET=1 is the fix."""
    pytest.importorskip("hf_xet")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", False)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\1" * 4096)
    with pytest.raises(ConnectionError) as raised:  # hf_xet's plain error: status and URL, no body
        api.upload_file(path_or_fileobj=str(weights), path_in_repo="model.safetensors", repo_id=repo)
    message, hint, code = failure_of(raised.value, debug_variable="HFRELEASE_DEBUG")
    assert code == ExitCode.PUBLISH_FAILED
    assert "501" in message and "xet-write-token" in message and "does not serve Xet storage" in message
    assert hint is not None and "HF_HUB_DISABLE_XET=1" in hint
    with (pytest.raises(HubError, match=r"^uploading model\.safetensors: the Hub answered HTTP 501"),
          hub_errors("uploading model.safetensors")):
        raise raised.value


def test_the_hubs_error_body_reaches_the_message(api: HfApi, repo: str) -> None:
    """An error answer's message (its JSON body's `error`) is part of what hfrelease says."""
    from huggingface_hub.errors import HfHubHTTPError

    with pytest.raises(HfHubHTTPError) as raised:
        api.create_repo(repo)  # it exists: 409, with the Hub's reason in the body
    message, _, code = failure_of(raised.value, debug_variable="HFRELEASE_DEBUG")
    assert code == ExitCode.PUBLISH_FAILED and "HTTP 4" in message
    assert f"({raised.value.server_message})" in message and raised.value.server_message
