"""Fixtures of the Hub server tests: a server on a free port with a tmp root, and a real HfApi client.

Re-exported by the conftest of each folder that uses them (tests/hub, tests/files), with the isolated client
made autouse there.

The suite-wide conftest puts huggingface_hub in offline mode so nothing reaches huggingface.co; these
tests lift it for the client and instead refuse any connection that is not to the loopback address.
Xet cannot be emulated, so it is switched off. huggingface_hub reads `HF_HUB_DISABLE_XET` once, when it
is imported: the variable is set here before the import, and the constant is patched too in case another
test module imported huggingface_hub first. Every call passes `endpoint=` explicitly (HfApi,
`hf_hub_download` and `snapshot_download` all honour it), so `HF_ENDPOINT` is only needed by the `hf` CLI.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hfrelease.hub import HubServer, serve

TOKEN = "hf_hubtest_0123456789abcdef"


@pytest.fixture
def hub_root(tmp_path: Path) -> Path:
    return tmp_path / "hub"


@pytest.fixture
def hub(hub_root: Path) -> Iterator[HubServer]:
    server = serve(hub_root, tokens=[TOKEN], fault_injection=True)
    yield server
    server.shutdown()


@pytest.fixture
def api(hub: HubServer) -> HfApi:
    return HfApi(endpoint=hub.url, token=TOKEN)


@pytest.fixture
def anonymous(hub: HubServer) -> HfApi:
    return HfApi(endpoint=hub.url, token=False)


@pytest.fixture
def repo(api: HfApi) -> str:
    """A fresh model repository (holding only the Hub's default `.gitattributes`)."""
    return api.create_repo("alice/family-fp8").repo_id


@pytest.fixture
def token() -> str:
    return TOKEN


@pytest.fixture
def cli_env(hub: HubServer) -> dict[str, str]:
    """Environment for an `hf` CLI subprocess talking to `hub` (and nothing else)."""
    return {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_TOKEN": TOKEN,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
