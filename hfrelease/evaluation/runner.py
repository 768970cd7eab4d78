"""Carry out an `EvalPlan`: start each server once, run its pending gates, record each result at once.

Every finished gate is in the ledger before the next one starts, so a crash, a dead server or Ctrl-C
loses only the gate in flight, and a re-run measures only what is missing; the gate in flight keeps its
answered requests in the request cache, so its re-run sends only the others. Every wait is bounded: each
request by the gate's request timeout, a server that stops answering by the stall watchdog, a dead one by
the server's watchdog. Comparisons against the reference are made from recorded samples after all
measuring is done.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from hfrelease import __version__
from hfrelease.atomic import write_atomic
from hfrelease.errors import ExitCode, HfreleaseError, MeasurementError
from hfrelease.evaluation.budget import InFlight, choose_in_flight
from hfrelease.evaluation.comparison import Comparison
from hfrelease.evaluation.custom_gate import run_custom_gate
from hfrelease.evaluation.failures import RequestsFailedError, classify_gate_failure
from hfrelease.evaluation.fidelity_gate import (
    artifact_lines,
    fidelity_run,
    post_json,
    read_raw,
    reference_lines,
    top_k,
)
from hfrelease.evaluation.lm_eval_gate import GateRun, LmEvalCall, RequestCache, generation_kwargs, run_lm_eval_gate
from hfrelease.evaluation.logs import route_lm_eval_logs, stderr_to
from hfrelease.evaluation.plan import (
    EvalPlan,
    GateJob,
    ModelFiles,
    ServerJob,
    find_gate_record,
    gate_call,
    manifest_gate,
    model_files,
    serve_command,
)
from hfrelease.evaluation.schedule import run_at_once
from hfrelease.evaluation.timeouts import MAX_RETRIES, gate_request_timeout, stall_window
from hfrelease.evaluation.utilization import LoadWatch, Utilization
from hfrelease.evaluation.verdict import Verdict, gate_verdict, seeded_value
from hfrelease.hashing import HashCache
from hfrelease.ledger.provenance import hardware, now_utc_iso, versions
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord, raw_files
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Gate, Manifest
from hfrelease.manifest.gate_rules import read_prompt_set
from hfrelease.redact import redact_env
from hfrelease.serving.alarm import Alarm
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.serving.plugin import ensure_plugin
from hfrelease.serving.process import VllmServer, check_identity, free_port, launch
from hfrelease.serving.stall import Progress, StallWatch
from hfrelease.sources import artifact_content

# A gate run measured in this process: (artifact id, gate id, seed): a gate with `seeds` has one run per seed.
RunKey = tuple[str, str, int]
AfterGates = Callable[[ServerJob, VllmServer, ServeCommand], None]
BeforeGates = Callable[[ServerJob, VllmServer, ServeCommand], ServerJob]  # the job to run, maybe a new budget


class EvalEvents(Protocol):
    """What the live view is told; every method is optional to act on."""

    def server_state(self, artifact_id: str, state: str) -> None: ...
    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None: ...
    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None: ...
    def server_load(self, artifact_id: str, summary: str) -> None: ...
    def log(self, message: str) -> None: ...


class NullEvents:
    def server_state(self, artifact_id: str, state: str) -> None:
        pass

    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None:
        pass

    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None:
        pass

    def server_load(self, artifact_id: str, summary: str) -> None:
        pass

    def log(self, message: str) -> None:
        pass


@dataclass(frozen=True, kw_only=True)
class GateRow:
    """One line of the gate table: an artifact and a gate."""

    artifact_id: str
    gate_id: str
    label: str
    origin: Literal["measured", "recorded"]
    status: Literal["ok", "void"]
    value: float
    stderr: float | None
    n: int
    truncated: int
    empty: int
    mode: str
    verdict: Verdict
    reason: str
    comparison: Comparison | None = None
    checks: tuple[tuple[str, Comparison], ...] = ()  # every check judged (accuracy, truncation, kl, flip_rate)
    # Runs merged (a gate with `seeds`): `value` is their mean, `n` the items, `truncated` / `empty` over all runs
    seeds: int = 1

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {k: v for k, v in self.__dict__.items() if k not in ("comparison", "checks")}
        if self.comparison is not None:
            data["comparison"] = dict(self.comparison.__dict__)
        if self.checks:
            data["checks"] = {name: dict(c.__dict__) for name, c in self.checks}
        return data


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

    @property
    def exit_code(self) -> ExitCode:
        if any(r.verdict == "void" for r in self.rows):
            return ExitCode.MEASUREMENT_FAILED
        if any(r.verdict == "fail" for r in self.rows):
            return ExitCode.GATE_FAILED
        return ExitCode.OK


def vllm_executable() -> str:
    """The `vllm` of the environment hfrelease runs in (the one the plugin is installed into)."""
    beside = Path(sys.executable).with_name("vllm")
    return str(beside) if beside.exists() else "vllm"


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
                      records=tuple(written), loads=tuple(loads))


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
            n, paths = _run_gates(manifest, job, base_url, server, command, ledger=ledger, events=events,
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
    server = launch(command, log_path=run_dir / f"{artifact.id}.server.log", port=port, base_env=base_env,
                    state=lambda text: events.server_state(artifact.id, text), log=events.log)
    return server, command


@dataclass(kw_only=True)
class GateContext:
    """What measuring the pending gates of one server job needs: the runner's side of both schedules."""

    manifest: Manifest
    job: ServerJob
    base_url: str
    server: VllmServer | None
    command: ServeCommand | None
    ledger: Ledger
    events: EvalEvents
    measured: dict[RunKey, LedgerRecord]
    log_dir: Path
    request_cache: Path | None = None
    force: bool = False
    hash_cache: HashCache | None = None
    load: LoadWatch | None = None
    own_alarm: Alarm = field(default_factory=Alarm)

    @property
    def alarm(self) -> Alarm:
        # Rung by whichever watchdog sees first that the gates' wait will never end: the server's (death) or
        # the stall watchdog. An attached server has no watchdog of its own, only the stall watchdog.
        return self.server.alarm if self.server is not None else self.own_alarm

    def request_cache_of(self, gate_job: GateJob) -> RequestCache | None:
        """The gate's request cache (emptied first when forced)."""
        if self.request_cache is None:
            return None
        cache = RequestCache(directory=self.request_cache, key=gate_job.input_key)
        if self.force:
            cache.clear()
        return cache

    def lm_eval_call(self, gate_job: GateJob, num_concurrent: int | None = None) -> LmEvalCall:
        files = model_files(self.job.artifact, self.job.model_dir)
        return gate_call(self.manifest, gate_job.gate, base_url=self.base_url, model=self.job.artifact.repo,
                         files=files, num_concurrent=num_concurrent)

    def measure(self, gate_job: GateJob, cache: RequestCache | None, on_progress: Any, *,
                redirect: bool = True) -> GateRun:
        """The gate measured in this process (fidelity gates, custom gates, and lm-eval gates run one at a time);
        `redirect`: send descriptor 2 to the run's log meanwhile (the concurrent schedule does it once for all)."""
        gate = gate_job.gate
        aid, model = self.job.artifact.id, self.job.artifact.repo
        if gate.is_fidelity:
            return _measure_fidelity(self.manifest, gate, aid, base_url=self.base_url, model=model,
                                     ledger=self.ledger, measured=self.measured, hash_cache=self.hash_cache,
                                     on_progress=on_progress)
        with stderr_to(self.log_dir / "lm-eval.log") if redirect else contextlib.nullcontext():
            return _measure(self.manifest, gate, base_url=self.base_url, model=model,
                            files=model_files(self.job.artifact, self.job.model_dir), on_progress=on_progress,
                            cache=cache)

    def interrupted(self) -> BaseException | None:
        """Why the main thread was interrupted: the server's death or a watchdog's reason (None: Ctrl-C)."""
        if self.server is not None and self.server.died is not None:
            return self.server.died
        return self.alarm.reason

    def failed(self, gate: Gate, exc: Exception) -> tuple[GateRun, MeasurementError]:
        """A gate's exception, classified: a void run and the harness's failure, or raised as what it is."""
        return _failed(self.server, self.alarm, gate=gate, base_url=self.base_url, exc=exc)

    def finish(self, gate_job: GateJob, run: GateRun, failure: MeasurementError | None, *, started_at: str,
               duration: float, schedule: Mapping[str, Any] | None = None) -> Path:
        """Record a finished gate (its raw file first), drop its request cache, tell the live view."""
        gate, aid, job = gate_job.gate, self.job.artifact.id, self.job
        if failure is not None:
            # A failed gate on a server that no longer serves (dead engine, gone process) is the server's death.
            died = classify_gate_failure(failure, base_url=self.base_url, gate=gate.id, attached=self.server is None)
            if died is not None:
                raise died
        if self.server is not None:
            self.server.check_alive()
        raw_name = None
        if run.raw is not None:
            # Content-addressed like a speed record's raw files, and written first: a record never names a
            # missing file. Not *.json: the ledger reads every *.json of an artifact's directory as a record.
            digest = hashlib.sha256(run.raw).hexdigest()[:12]
            raw_name = f"gate-{gate.id}-{gate_job.input_key[:12]}-{digest}.fidelity.jsonl"
            target = self.ledger.root / aid / raw_name
            if not target.exists():
                write_atomic(target, run.raw)
        load = self.load.result() if self.load is not None else None
        record = _record(self.manifest, job, gate_job, run, command=self.command, base_url=self.base_url,
                         started_at=started_at, duration=duration, failure=failure,
                         memory=self.server.memory() if self.server is not None else None, raw_name=raw_name,
                         schedule=schedule, load=load)
        path = self.ledger.write(record)
        if self.request_cache is not None:
            RequestCache(directory=self.request_cache, key=gate_job.input_key).clear()  # the record holds them now
        self.measured[(aid, gate.id, gate.seed)] = record
        summary = f"{run.value:.3f} (n={run.n})" if record.status == "ok" else f"void: {record.void_reason}"
        self.events.gate_finished(aid, gate_job.label, summary)
        return path


def _run_gates(
    manifest: Manifest,
    job: ServerJob,
    base_url: str,
    server: VllmServer | None,
    command: ServeCommand | None,
    *,
    ledger: Ledger,
    events: EvalEvents,
    measured: dict[RunKey, LedgerRecord],
    log_dir: Path,
    request_cache: Path | None = None,
    force: bool = False,
    hash_cache: HashCache | None = None,
    load: LoadWatch | None = None,
) -> tuple[int, list[Path]]:
    """The job's pending gates one after another, each with its own num_concurrent (the sequential schedule)."""
    context = GateContext(manifest=manifest, job=job, base_url=base_url, server=server, command=command,
                          ledger=ledger, events=events, measured=measured, log_dir=log_dir,
                          request_cache=request_cache, force=force, hash_cache=hash_cache, load=load)
    requests = 0
    written: list[Path] = []
    alarm = context.alarm
    for gate_job in job.pending:
        gate = gate_job.gate
        aid = job.artifact.id
        started_at, t0 = now_utc_iso(), time.monotonic()
        events.gate_progress(aid, gate_job.label, 0, 0)
        cache = context.request_cache_of(gate_job)
        progress = Progress()

        def on_progress(done: int, total: int, a: str = aid, g: str = gate_job.label, p: Progress = progress) -> None:
            p.update(done, total)
            events.gate_progress(a, g, done, total)

        def measure(gate_job: GateJob = gate_job, cache: RequestCache | None = cache,
                    on_progress: Any = on_progress) -> GateRun:
            return context.measure(gate_job, cache, on_progress)

        timeout = gate_request_timeout(gate)
        watch = StallWatch(base_url=base_url, progress=progress, alarm=alarm, window=stall_window(timeout),
                           fallback_window=timeout)
        try:
            run, failure = _watched(server, alarm, measure, watch=watch, gate=gate, base_url=base_url)
        except KeyboardInterrupt:
            # A watchdog records why before it interrupts the main thread, wherever the interrupt lands.
            reason = context.interrupted()
            if reason is not None:
                raise reason from None
            raise
        requests += run.requests
        written.append(context.finish(gate_job, run, failure, started_at=started_at,
                                      duration=time.monotonic() - t0))
    return requests, written


def _watched(
    server: VllmServer | None, alarm: Alarm, measure: Callable[[], GateRun], *, watch: StallWatch, gate: Gate,
    base_url: str,
) -> tuple[GateRun, MeasurementError | None]:
    """`measure()` with the watchdogs armed: the run, or a void run and the harness's failure."""
    alarm.arm()
    try:
        with watch:
            return measure(), None
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        return _failed(server, alarm, gate=gate, base_url=base_url, exc=exc)
    finally:
        alarm.disarm()


def _failed(
    server: VllmServer | None, alarm: Alarm, *, gate: Gate, base_url: str, exc: Exception,
) -> tuple[GateRun, MeasurementError]:
    """What a gate's exception means: a void run and the harness's failure, or raised as what it is.

    The server's death however it shows (the watchdog's interrupt, or the client's "connection refused/
    reset", which can win the race against the watchdog when the server is killed) is ServerDiedError; a
    stall is the stall watchdog's ServerError; a request that timed out on every attempt while the server
    kept working is a MeasurementError (exit 6) naming the timeout.
    """
    if isinstance(exc, RequestsFailedError):
        # Stopped mid-gate: nothing is recorded and the answered requests stay in the request cache, so the
        # re-run sends only the rest. A server that cannot serve any more is dead (exit 5), else exit 6.
        _raise_if_dead(server, exc)
        raise classify_gate_failure(exc, base_url=base_url, gate=gate.id, attached=server is None) or exc from None
    if isinstance(exc, MeasurementError):
        # One gate's harness failing (a custom command that crashed, a metric lm-eval did not
        # report) voids that gate only: the server is fine, the other gates still run.
        _raise_if_dead(server, exc)
        void = GateRun(value=0.0, stderr=None, metrics={}, samples=[], n=0, truncated=0, empty=0, requests=0,
                       task_hash=None)
        return void, exc
    # A dead (or dying) server group makes any error of its client engine death (exit 5), not a bug.
    _raise_if_dead(server, exc)
    if alarm.reason is not None:
        raise alarm.reason from None
    if _timed_out(exc):
        timeout = gate_request_timeout(gate)
        raise MeasurementError(
            f"gate {gate.id!r}: a request to {base_url} got no answer within its {timeout:g} s timeout "
            f"({MAX_RETRIES} attempts) while the server kept working",
            hint=f"The answered requests are kept: `hfrelease eval` again resumes from them. If the requests "
            f"are just slow, raise request_timeout of gate {gate.id!r} (derived from max_tokens when unset).",
        ) from None
    raise exc


def _timed_out(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is a timeout (aiohttp's, asyncio's, the OS's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):  # asyncio.TimeoutError and aiohttp's timeouts are TimeoutError
            return True
        current = current.__cause__ or current.__context__
    return False


def _raise_if_dead(server: VllmServer | None, exc: BaseException) -> None:
    if server is not None:
        server.disarm()
        if (died := server.death_behind(exc)) is not None:
            raise died from None


def _measure(
    manifest: Manifest, gate: Gate, *, base_url: str, model: str, files: ModelFiles, on_progress: Any,
    cache: RequestCache | None = None,
) -> GateRun:
    if gate.task is not None:
        call = gate_call(manifest, gate, base_url=base_url, model=model, files=files)
        return run_lm_eval_gate(gate, call, on_progress=on_progress, cache=cache)
    return run_custom_gate(gate, base_url=base_url, model=model, cwd=manifest.root)


def _measure_fidelity(
    manifest: Manifest, gate: Gate, artifact_id: str, *, base_url: str, model: str, ledger: Ledger,
    measured: Mapping[RunKey, LedgerRecord], hash_cache: HashCache | None, on_progress: Any,
) -> GateRun:
    """The reference generates and scores its continuations; any other artifact scores the reference's
    tokens, read from the raw file beside the reference's record of this gate (measured in this run, or
    recorded for the reference's current content)."""
    timeout = gate_request_timeout(gate)

    def post(url: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return post_json(url, body, timeout=timeout)

    if artifact_id == manifest.reference.id:
        prompts = read_prompt_set(manifest.resolve(gate.fidelity or ""))
        lines = reference_lines(gate, prompts, base_url=base_url, model=model, post=post, on_progress=on_progress)
        return fidelity_run(lines, requests=2 * len(lines))
    reference = measured.get((manifest.reference.id, gate.id, gate.seed)) or _reference_record(
        manifest, gate, ledger=ledger, hash_cache=hash_cache)
    names = [name for key, name in raw_files(reference) if key == "fidelity_raw"] if reference is not None else []
    if reference is None or reference.status != "ok" or len(names) != 1:
        raise MeasurementError(
            f"fidelity gate {gate.id!r} needs the reference's record of it (its continuations and logprobs), "
            "and there is none for the reference's current content",
            hint=f"Evaluate the reference first: hfrelease eval --artifact {manifest.reference.id} --gate {gate.id}")
    lines = artifact_lines(gate, read_raw(ledger.raw_bytes(reference, names[0])), base_url=base_url, model=model,
                           post=post, on_progress=on_progress)
    return fidelity_run(lines, requests=len(lines))


def _record(
    manifest: Manifest, job: ServerJob, gate_job: GateJob, run: GateRun, *, command: ServeCommand | None,
    base_url: str, started_at: str, duration: float, failure: MeasurementError | None = None,
    memory: Mapping[str, Any] | None = None, raw_name: str | None = None, schedule: Mapping[str, Any] | None = None,
    load: Utilization | None = None,
) -> LedgerRecord:
    """The ledger record of one gate run; `memory` is the server's so far (start-up figures, peak PSS),
    absent for an attached server, whose processes hfrelease cannot see. `schedule`: how the gate ran beside
    the artifact's others (its budget of requests in flight, the gates beside it); `load`: the server's
    utilization from its first gate's start to this gate's end (all gates' requests, not this gate's alone)."""
    gate = gate_job.gate
    assert job.content is not None
    bad = run.truncated + run.empty
    void_reason = None
    if failure is not None:
        void_reason = f"the harness failed: {failure.message}"
    elif run.n == 0:
        void_reason = "no samples were scored"
    elif bad / run.n > gate.max_truncated and run.failed:
        how = ", ".join(f"{kind}: {count}" for kind, count in run.failures.items())
        void_reason = (
            f"{run.failed} of {run.n} requests failed after every attempt ({how}); with {run.truncated} cut off "
            f"and {run.empty - run.failed} empty, over the limit of {gate.max_truncated:.0%}: see the server's log"
        )
    elif bad / run.n > gate.max_truncated:
        # An empty answer the server ended itself (finish reason not "length": null or blank content, e.g. a
        # reasoning parser that took the whole answer as reasoning) is not a budget problem: more tokens
        # would not help, so it is not advised.
        unbudgeted = sum(1 for s in run.samples if s.get("empty") and not s.get("truncated")) - run.failed
        advice = [f"raise max_tokens for gate {gate.id!r}"] if run.truncated else []
        if unbudgeted > 0:
            advice.append(f"{unbudgeted} empty answer(s) were ended by the server, not the budget (null or blank "
                          "message content): check the reasoning parser and the chat template's thinking switch")
        void_reason = (
            f"{run.truncated} of {run.n} answers were cut off by the {gate.max_tokens}-token budget and "
            f"{run.empty} were empty (limit {gate.max_truncated:.0%}): {'; '.join(advice)}"
        )
    argv = list(command.argv) if command else ["(attached)", base_url]
    env = redact_env(dict(command.env)) if command else {}
    generation: dict[str, Any] = {**generation_kwargs(gate), "limit": gate.limit, "num_fewshot": gate.num_fewshot,
                                  "api": gate.api}
    extra: dict[str, Any] = {}
    if gate.is_fidelity:
        # Greedy continuations of max_tokens tokens, scored with top_k prompt logprobs through /v1/completions.
        generation = {"max_tokens": gate.max_tokens, "temperature": 0.0, "top_k_logprobs": top_k(gate),
                      "api": "completions", "prompts": gate.fidelity}
        extra = {"fidelity_raw": [raw_name] if raw_name else [],
                 "kl_approximation": "KL on the shared reported top-k support plus one rest bucket (a lower bound)"}
        if job.artifact.id != manifest.reference.id:
            extra["compared_with"] = manifest.reference.id
    return LedgerRecord(
        kind="gate",
        family=manifest.family.name,
        artifact_id=job.artifact.id,
        artifact_hash=job.content.sha256,
        artifact_files=job.content.files,
        subject_id=gate.id,
        harness="fidelity" if gate.is_fidelity else "lm-eval" if gate.task else "custom",
        task=gate.task or gate.fidelity or gate.id,
        task_hash=run.task_hash,
        mode=gate.mode,
        n=run.n,
        seed=gate.seed,
        generation=generation,
        metrics={k: Metric(value=v["value"] or 0.0, stderr=v["stderr"]) for k, v in run.metrics.items()},
        samples=tuple(Sample.model_validate(s) for s in run.samples),
        truncated=run.truncated,
        empty=run.empty,
        serve=ServeRecord(argv=tuple(argv), env=env, display=job.public.display()),
        versions={**versions(), "hfrelease": __version__},
        hardware=hardware(),
        started_at=started_at,
        duration_s=round(duration, 3),
        input_key=gate_job.input_key,
        # `requests`: sent by this run; `resumed`: answers an interrupted run of the same inputs received.
        extra={"metric": gate.metric, "value": run.value, "requests": run.requests, "lm_eval": run.lm_eval,
               **({"resumed": run.resumed} if run.resumed else {}),
               **extra, **({"memory": dict(memory)} if memory else {}),
               **({"failed_requests": dict(run.failures)} if run.failures else {}),
               **({"schedule": dict(schedule)} if schedule else {}),
               **({"server_load": load.as_dict()} if load is not None else {})},
        status="void" if void_reason else "ok",
        void_reason=void_reason,
    )


def judge(
    plan: EvalPlan,
    *,
    ledger: Ledger,
    measured: Mapping[RunKey, LedgerRecord],
    hash_cache: HashCache | None,
    any_harness: bool = False,
) -> list[GateRow]:
    """Compare each artifact's gate result with the reference's, on the same samples.

    A gate with `seeds` is one row over all of its runs, judged once every seed's run is recorded (on the
    artifact and the reference; `hfrelease.evaluation.seeds`): a void run voids the row. `any_harness`: the
    reference's record may have been made with another vLLM / lm-eval than the one installed here (judging
    where no vLLM is installed; see `find_gate_record`).
    """
    manifest = plan.manifest
    reference = manifest.reference
    rows: list[GateRow] = []
    reference_records: dict[tuple[str, int], LedgerRecord | None] = {}
    for job in plan.servers:
        runs: dict[str, list[GateJob]] = {}
        for gate_job in job.gates:
            runs.setdefault(gate_job.gate.id, []).append(gate_job)
        for gate_id, gate_jobs in runs.items():
            gate = manifest_gate(manifest, gate_id)
            found = [measured.get((job.artifact.id, g.gate.id, g.gate.seed)) or g.recorded for g in gate_jobs]
            records = [r for r in found if r is not None]
            if len(records) != len(found):
                continue  # a seed's run is not recorded: nothing to judge yet
            origin: Literal["measured", "recorded"] = (
                "measured" if any((job.artifact.id, gate_id, g.gate.seed) in measured for g in gate_jobs)
                else "recorded")
            refs: list[LedgerRecord] | None = None
            if job.artifact.id != reference.id and all(r.status == "ok" for r in records):
                found_refs: list[LedgerRecord | None] = []
                for g in gate_jobs:
                    if (gate_id, g.gate.seed) not in reference_records:
                        reference_records[(gate_id, g.gate.seed)] = measured.get(
                            (reference.id, gate_id, g.gate.seed)) or _reference_record(
                            manifest, g.gate, ledger=ledger, hash_cache=hash_cache, any_harness=any_harness)
                    found_refs.append(reference_records[(gate_id, g.gate.seed)])
                refs = [r for r in found_refs if r is not None] if None not in found_refs else None
            judged = gate_verdict(gate, records, reference_id=reference.id, reference=refs,
                                  samples=ledger.load_samples)
            value = seeded_value(gate, records, [ledger.load_samples(r) if len(records) > 1 and r.status == "ok"
                                                 else () for r in records])
            rows.append(GateRow(
                artifact_id=job.artifact.id, gate_id=gate.id, label=gate.label or gate.id, origin=origin,
                status="void" if any(r.status == "void" for r in records) else "ok",
                value=float("nan") if value.value is None else value.value, stderr=value.stderr, n=value.n,
                truncated=value.truncated, empty=value.empty, mode=gate.mode, verdict=judged.verdict,
                reason=judged.reason, comparison=judged.comparison, checks=judged.checks, seeds=value.seeds,
            ))
    return rows


def _reference_record(
    manifest: Manifest, gate: Gate, *, ledger: Ledger, hash_cache: HashCache | None, any_harness: bool = False,
) -> LedgerRecord | None:
    """The reference's recorded result for `gate` under the current inputs (not a stale one).

    The reference is identified without downloading it (a Hub source from the Hub's listing), so a quant's
    eval job, which serves only the quant, still compares it with the reference.
    """
    reference = manifest.reference
    try:
        _, content = artifact_content(manifest, reference, download=False, cache=hash_cache)
    except HfreleaseError:
        return None
    public = build_serve_command(manifest, reference, model=reference.repo)
    return find_gate_record(manifest, gate, ledger=ledger, artifact_id=reference.id, content_sha256=content.sha256,
                            public=public, any_harness=any_harness)
