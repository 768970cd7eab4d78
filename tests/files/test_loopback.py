"""Which Hub URLs name this machine: offline mode (HF_HUB_OFFLINE=1) is lifted for exactly those."""

from __future__ import annotations

import pytest

from hfrelease.files.sources import hub_access, is_loopback

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://localhost:1",
        "http://LOCALHOST.:2",
        "http://[::1]:9",
        "http://127.0.0.2:3",
        "http://[::ffff:127.0.0.1]:4",
        "http://hub.localhost:5",
    ],
)
def test_every_loopback_spelling_is_this_machine(url: str) -> None:
    """localhost, 127.0.0.0/8 and ::1 in any spelling (before: only the three literal names)."""
    assert is_loopback(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://huggingface.co",
        "http://10.0.0.1:8080",
        "http://[::ffff:10.0.0.1]:1",
        "http://localhost.example.org",
        "http://127.0.0.1.nip.io",
    ],
)
def test_other_hosts_are_not(url: str) -> None:
    assert not is_loopback(url)


def test_offline_mode_is_lifted_only_inside_the_block_and_only_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with hub_access("http://127.0.0.2:9"):
        assert constants.HF_HUB_OFFLINE is False
    assert constants.HF_HUB_OFFLINE is True
    with hub_access("https://huggingface.co"):
        assert constants.HF_HUB_OFFLINE is True
