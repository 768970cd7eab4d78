"""Reads answered 429 or 5xx are tried again, as huggingface_hub tries a download again: `publish` plans a
release through a Hub that answers its first reads 429 and 503, and `verify` checks it through one.

The Hub is the built-in one with its fault injection (hfrelease/hub/faults.py), a test-only switch that makes
chosen requests fail on cue: here a few 429s and 503s, then the Hub answers as usual.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.hub import FaultRule, HubServer
from hfrelease.hub_client import ATTEMPTS, bounded_client_factory
from tests.conftest import CliRun
from tests.publish_family import TOKEN

pytestmark = pytest.mark.usefixtures("publish_isolation")


def test_a_read_answered_429_then_503_is_tried_again(hub: HubServer) -> None:
    """A GET answered 429 (with Retry-After) and then 503 gets its answer on the third attempt, after the
    pause the Hub asked for; a POST answered 503 is not sent again (it may have been applied)."""
    pauses: list[float] = []
    client = bounded_client_factory(sleep=pauses.append)()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    hub.faults.add(FaultRule(endpoint="whoami", status=429, retry_after=2, times=1))
    hub.faults.add(FaultRule(endpoint="whoami", status=503, times=1))
    answer = client.get(f"{hub.url}/api/whoami-v2", headers=headers)
    assert answer.status_code == 200 and pauses == [2.0, 2.0]
    hub.faults.add(FaultRule(endpoint="whoami", status=503, times=None))
    assert client.get(f"{hub.url}/api/whoami-v2", headers=headers).status_code == 503
    assert hub.faults.describe()[0]["fired"] == ATTEMPTS
    hub.faults.clear()
    hub.faults.add(FaultRule(endpoint="repo-create", status=503, times=None))
    create = {"name": "x", "organization": "alice", "type": "model"}
    assert client.post(f"{hub.url}/api/repos/create", headers=headers, json=create).status_code == 503
    assert hub.faults.describe()[0]["fired"] == 1
    client.close()


def test_publish_and_verify_through_a_hub_answering_429_and_503(
    cli: CliRun, family: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's reads (repo info at a revision, the tree) and verify's (the tags, the tree), each answered 429 or
    503 before the Hub recovers: publish and verify exit 0 (both exited 7 on the first 429)."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    for endpoint in ("repo-info", "tree"):
        hub.faults.add(FaultRule(endpoint=endpoint, status=429, retry_after=0, times=1))
        hub.faults.add(FaultRule(endpoint=endpoint, status=503, times=1))
    code, _, err = cli(["publish", str(family), "--hub", hub.url])
    assert code == ExitCode.OK, err
    assert not hub.faults.describe(), "every injected fault fired"
    for endpoint in ("refs", "tree"):
        hub.faults.add(FaultRule(endpoint=endpoint, status=503, times=1))
    code, out, err = cli(["verify", str(family), "--hub", hub.url])
    assert code == ExitCode.OK, out + err
    assert not hub.faults.describe()
