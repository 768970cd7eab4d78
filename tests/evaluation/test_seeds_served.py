"""Seeds reach the server: a seeded gate run through lm-eval against a fake OpenAI server, request by request."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.ledger.store import Ledger
from tests.conftest import CliRun
from tests.fake_openai import FakeOpenAI
from tests.serving.test_bounded_waits import MODEL, QUESTIONS, make_family

# lm-eval records its git commit for provenance by running `git`: harmless, and not this test's subject.
pytestmark = [pytest.mark.unit, pytest.mark.allow_subprocess]


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A fake server, and hfrelease's cache in the test's directory."""
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "hfrelease-cache"))
    fake = FakeOpenAI(model=MODEL, keep_alive=True, metrics=True).start()
    yield fake
    fake.stop()


def _seeded(family: Path, seeds: list[int]) -> None:
    text = (family / "release.toml").read_text()
    head = text.split("temperature = ")[0].rstrip("\n") + "\n"
    (family / "release.toml").write_text(head + f"temperature = 0.6\ntop_p = 0.95\nseeds = {seeds}\n")


def _run(cli: CliRun, family: Path, server: FakeOpenAI, tmp_path: Path) -> int:
    code, _, err = cli(["eval", str(family), "--artifact", "ref", "--endpoint", server.url, "--json",
                        "--run-dir", str(tmp_path / "runs" / str(time.monotonic_ns()))])
    assert code == ExitCode.OK, err
    return code


def test_each_seed_reaches_every_request_and_is_recorded_once(tmp_path: Path, cli: CliRun, server: FakeOpenAI) -> None:
    """Every request of seed s's run carries seed s and the sampling settings; one record per seed; a warm
    re-run sends nothing; a seed added later is the only one sent."""
    family = make_family(tmp_path)
    _seeded(family, [7, 8])
    _run(cli, family, server, tmp_path)
    assert Counter(p.get("seed") for p in server.payloads) == {7: QUESTIONS, 8: QUESTIONS}
    assert {(p.get("temperature"), p.get("top_p")) for p in server.payloads} == {(0.6, 0.95)}
    records = Ledger(family / "results").records(kind="gate")
    assert sorted(r.seed for r in records) == [7, 8] and len({r.input_key for r in records}) == 2

    _run(cli, family, server, tmp_path)
    assert len(server.payloads) == 2 * QUESTIONS  # every seed recorded: nothing sent

    _seeded(family, [7, 8, 9])
    _run(cli, family, server, tmp_path)
    assert Counter(p.get("seed") for p in server.payloads[2 * QUESTIONS:]) == {9: QUESTIONS}
    assert sorted(r.seed for r in Ledger(family / "results").records(kind="gate")) == [7, 8, 9]
