"""An artifact's gates at once (the concurrent schedule) against a fake server: one shared budget of requests in
flight, the samples of a run one gate at a time, each record saying how it ran."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.ledger.store import Ledger
from tests.conftest import CliRun
from tests.fake_openai import FakeOpenAI

pytestmark = pytest.mark.usefixtures("lm_eval_logging")

FP8 = "tester/Fixture-1M-FP8-Dynamic"


def _two_gates(family: Path, *, schedule: str, in_flight: int) -> None:
    """The gate family with a second lm-eval gate (thinking mode: the same task, other requests) and [eval]."""
    path = family / "release.toml"
    manifest = tomllib.loads(path.read_text())
    arith = manifest["gate"][0]
    manifest["gate"] = [arith, {**arith, "id": "arith-think", "mode": "thinking"}]
    manifest["eval"] = {"schedule": schedule, "in_flight": in_flight}
    path.write_text(tomli_w.dumps(manifest))


def _run(cli: CliRun, family: Path, server: FakeOpenAI, run_dir: Path) -> dict[str, Any]:
    code, out, err = cli(["eval", str(family), "--artifact", "fp8", "--endpoint", server.url, "--force",
                          "--run-dir", str(run_dir), "--json"])  # fmt: skip
    assert code in (0, 4), err
    report: dict[str, Any] = json.loads(out)
    return report


def _samples(family: Path, gate: str) -> list[tuple[str, str | None, float]]:
    ledger = Ledger(family / "results")
    record = ledger.records(artifact_id="fp8", subject_id=gate, kind="gate")[-1]
    return sorted((s.doc_id, s.response, s.score) for s in ledger.load_samples(record))


def test_gates_at_once_share_the_budget_and_score_as_one_at_a_time(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """Two gates at once keep at most [eval] in_flight requests at the server together (and more than one at a
    time), every sample scores as in a run one gate at a time, and the records and the JSON report say how
    they ran."""
    _two_gates(gate_family, schedule="sequential", in_flight=3)
    server = fake_server(FP8, delay=0.05).start()
    sequential = _run(cli, gate_family, server, tmp_path / "sequential")
    alone = {gate: _samples(gate_family, gate) for gate in ("arith", "arith-think")}
    assert sequential["loads"][0]["schedule"] == "sequential"

    _two_gates(gate_family, schedule="concurrent", in_flight=3)
    server.max_in_flight = 0
    concurrent = _run(cli, gate_family, server, tmp_path / "concurrent")
    assert 2 <= server.max_in_flight <= 3  # the budget, shared by both gates (each has num_concurrent 4)
    for gate in ("arith", "arith-think"):
        assert _samples(gate_family, gate) == alone[gate]
    verdicts = {(row["artifact_id"], row["gate_id"]): row["verdict"] for row in concurrent["rows"]}
    assert verdicts == {(row["artifact_id"], row["gate_id"]): row["verdict"] for row in sequential["rows"]}
    load = concurrent["loads"][0]
    assert (load["schedule"], load["in_flight"], load["source"], load["gates"]) == ("concurrent", 3, "manifest", 2)
    assert load["utilization"] is None  # the fake exposes no vLLM counters
    ledger = Ledger(gate_family / "results")
    record = ledger.records(artifact_id="fp8", subject_id="arith", kind="gate")[-1]
    assert record.extra["schedule"] == {"in_flight": 3, "beside": ["arith-think"]}
