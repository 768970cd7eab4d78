"""A concurrency sweep measured in the same `eval --speed` run sets that run's gate budget: measured first, on the
gate server, and the dry run says the budget will come from it."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import tomli_w

from hfrelease.evaluation import budget, runner
from hfrelease.evaluation.budget import InFlight, Sweep, SweepPoint, measured_first, planned_sweep
from hfrelease.evaluation.events import NullEvents
from hfrelease.evaluation.plan import ServerJob, plan_eval
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

SWEEP = Sweep(workload_id="chat", points=(SweepPoint(concurrency=1, throughput=100.0, record="a"),
                                           SweepPoint(concurrency=2, throughput=190.0, record="b"),
                                           SweepPoint(concurrency=4, throughput=200.0, record="c")))


@pytest.fixture
def family(fixture_family: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture family (its `chat` workload sweeps concurrency 1 and 2) with a weight file per checkpoint."""
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "hfrelease-cache"))
    for checkpoint in (fixture_family / "checkpoints").iterdir():
        (checkpoint / "model.safetensors").write_bytes(checkpoint.name.encode())
    return fixture_family


def test_planned_sweep_is_the_widest_workload_with_a_level_to_measure() -> None:
    """The workload with the most concurrency levels (at least two) is the sweep; none when its levels are all
    recorded (the ledger has it already) or no workload has two levels."""
    found = planned_sweep([("chat", 1, True), ("chat", 2, True), ("load", 1, False), ("load", 4, True),
                           ("load", 16, False)])
    assert found is not None and (found.workload_id, found.levels) == ("load", (1, 4, 16))
    assert planned_sweep([("load", 1, False), ("load", 4, False), ("chat", 1, True), ("chat", 2, True)]) is None
    assert planned_sweep([("chat", 1, True), ("longdoc", 1, True)]) is None


def test_budget_measured_first_is_the_knee_else_the_fallback() -> None:
    """With the sweep now recorded the budget is its knee and says it was measured just before the gates; without
    it, the fallback says the sweep was not recorded."""
    fallback = InFlight(value=8, source="gates", reason="the largest num_concurrent of its gates")
    manifest = SimpleNamespace(eval=SimpleNamespace(in_flight=None))
    chosen = measured_first(manifest, [], SWEEP, fallback)  # type: ignore[arg-type]
    assert (chosen.value, chosen.source, chosen.sweep) == (2, "sweep", SWEEP)
    assert chosen.reason.endswith("measured on this server just before the gates")
    failed = measured_first(manifest, [], None, fallback)  # type: ignore[arg-type]
    assert (failed.value, failed.source) == (8, "gates") and "was not recorded" in failed.reason


def test_dry_run_says_the_budget_comes_from_the_sweep_measured_first(family: Path, cli: CliRun) -> None:
    """`eval --speed --dry-run`: each artifact whose gates run at once takes its budget from the `chat` sweep
    measured on its gate server before the gates, and its no-speculation points say they run before the gates."""
    code, out, err = cli(["eval", "--dry-run", "--speed", "--json", str(family)])
    assert code == 0, err
    data = json.loads(out)
    for server in data["servers"]:
        flight = server["in_flight"]
        assert flight["source"] == "sweep-first", server["artifact"]
        assert "sweep of workload 'chat' at concurrency 1, 2, measured on this server first" in flight["reason"]
        assert "if it is not recorded, 8:" in flight["reason"]
    before = {(s["artifact"], s["speculative"]): s["before_gates"] for s in data["speed"]["servers"]}
    assert before[("ref", "none")] and before[("fp8", "none")]
    assert not any(v for (_, spec), v in before.items() if spec != "none")
    code, out, _ = cli(["eval", "--dry-run", "--speed", str(family)])
    assert "gates at once, requests in flight: the knee of the concurrency sweep" in out
    assert "before its gates, whose budget is this sweep's knee" in out
    code, out, _ = cli(["eval", "--dry-run", str(family)])  # without --speed no sweep is measured
    assert "gates at once, 8 requests in flight: the largest num_concurrent" in out


def test_sequential_gates_keep_their_speed_points_after_them(family: Path, cli: CliRun) -> None:
    """Gates run one after another have no shared budget: their artifact's speed points stay after the gates."""
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    data["eval"] = {"schedule": "sequential"}
    path.write_text(tomli_w.dumps(data))
    code, out, err = cli(["eval", "--dry-run", "--speed", "--json", str(family)])
    assert code == 0, err
    plan = json.loads(out)
    assert all(s["in_flight"] is None for s in plan["servers"])
    assert not any(s["before_gates"] for s in plan["speed"]["servers"])


def test_run_measures_the_sweep_before_the_gates_and_takes_its_knee(family: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """On the gate server the speed points are measured first; the gates then run with the knee of the sweep now
    in the ledger as their budget (and its curve for utilization); nothing is measured again after them."""
    from hfrelease.stages.eval import _Sharing

    manifest = load_manifest(family)
    plan = plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref"])
    order: list[str] = []
    ran: list[ServerJob] = []

    class Session:
        plan = SimpleNamespace(manifest=manifest)
        measured = False

        def shareable(self, artifact_id: str, command: Any) -> Any:
            return None if self.measured else "speed job"

        def measure_on(self, job: Any, server: Any, command: Any, events: Any = None) -> None:
            order.append("speed")
            self.measured = True

    found: list[dict[str, Any]] = []

    def find_sweep(ledger: Ledger, **where: Any) -> Sweep:
        found.append(where)
        return SWEEP

    server = SimpleNamespace(endpoint=SimpleNamespace(base_url="http://127.0.0.1:1"), stop=lambda: None)

    def gates(manifest: Any, job: ServerJob, *args: Any, **kwargs: Any) -> Any:
        order.append("gates")
        ran.append(job)
        return 0, [], SimpleNamespace()

    monkeypatch.setattr(budget, "find_sweep", find_sweep)
    monkeypatch.setattr(runner, "_start", lambda manifest, job, **kw: (server, "command"))
    monkeypatch.setattr(runner, "_gates_with_load", gates)
    monkeypatch.setattr(runner, "judge", lambda plan, **kw: [])
    sharing = _Sharing(Session(), NullEvents(), ledger=Ledger(tmp_path / "ledger"),  # type: ignore[arg-type]
                       sweeps_first={"ref": budget.PlannedSweep(workload_id="chat", levels=(1, 2))})
    runner.run_eval(plan, ledger=Ledger(tmp_path / "ledger"), run_dir=tmp_path / "run",
                    before_gates=sharing.before, after_gates=sharing.after)
    assert order == ["speed", "gates"]
    job = plan.servers[0]
    assert job.content is not None
    assert found == [{"artifact_id": "ref", "content_sha256": job.content.sha256,
                      "serve_display": job.public.display()}]
    assert ran[0].in_flight is not None and (ran[0].in_flight.value, ran[0].in_flight.source) == (2, "sweep")
    assert ran[0].sweep is SWEEP and replace(ran[0], in_flight=job.in_flight, sweep=job.sweep) == job
