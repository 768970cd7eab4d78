"""Carry out a `SpeedPlan`: start each (artifact, config) server once, measure its points, record each.

Per point: warm-up invocations (not counted, see `warmup_requests`), then `repeats` measured
invocations of `vllm bench serve`, each bracketed by two `/metrics` snapshots whose delta gives the
speculative counters of exactly those requests. Every finished point is in the ledger before the next starts, so a
server that dies mid-sweep loses only the point in flight; the failure is reported and the remaining
servers still run.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from hfrelease.errors import ExitCode, MeasurementError, ServerError
from hfrelease.evaluation.plan import model_files
from hfrelease.evaluation.timeouts import stall_window, workload_request_timeout
from hfrelease.files.atomic import write_atomic
from hfrelease.ledger.provenance import now_utc_iso
from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.serving.emulation import ensure_route, with_emulation
from hfrelease.serving.plugin import ensure_plugin
from hfrelease.serving.process import VllmServer, free_port, launch
from hfrelease.serving.stall import Progress, StallWatch
from hfrelease.speed import bench
from hfrelease.speed.best_record import record_best_configs
from hfrelease.speed.metrics import parse_counters, relevant_lines, scrape
from hfrelease.speed.noise import host_noise
from hfrelease.speed.per_request import PerRequest, send_each
from hfrelease.speed.plan import PointJob, SpeedPlan, SpeedServerJob
from hfrelease.speed.point_requests import (
    baseline_record,
    requests_extra,
    requests_file,
    wants_requests,
    with_output_match,
)
from hfrelease.speed.records import point_record, raw_files, short_outputs, write_point
from hfrelease.speed.result import SpeedRow, row_from_record
from hfrelease.speed.steps import bench_request, point_steps, sweep_prompts
from hfrelease.speed.summary import Repeat, summarise
from hfrelease.speed.verdict import BestConfig, DraftCheck, best_configs, draft_checks, own_head_checks, with_speedups
from hfrelease.verdicts import severity


class SpeedEvents(Protocol):
    """What the live view is told while the speed anchors run."""

    def server_state(self, server_id: str, state: str) -> None: ...
    def point_progress(self, server_id: str, point_id: str, text: str) -> None: ...
    def log(self, message: str) -> None: ...


class NullSpeedEvents:
    def server_state(self, server_id: str, state: str) -> None:
        pass

    def point_progress(self, server_id: str, point_id: str, text: str) -> None:
        pass

    def log(self, message: str) -> None:
        pass


@dataclass(kw_only=True)
class Timing:
    """Where the wall time of a run went (seconds): what BENCHMARKS.md's overhead ratio is made of."""

    wall: float = 0.0
    server_start: float = 0.0
    server_stop: float = 0.0
    measured: float = 0.0  # the benchmark's own `duration` of every measured repeat
    warmup: float = 0.0  # the same for warm-up invocations
    scrape: float = 0.0  # reading /metrics around the repeats (part of the time outside the server)

    @property
    def outside_server(self) -> float:
        """Wall time not spent starting/stopping servers nor generating: hfrelease's and the client's own."""
        return max(0.0, self.wall - self.server_start - self.server_stop - self.measured - self.warmup)

    def as_dict(self) -> dict[str, float]:
        return {"wall_s": round(self.wall, 3), "server_start_s": round(self.server_start, 3),
                "server_stop_s": round(self.server_stop, 3), "measured_s": round(self.measured, 3),
                "warmup_s": round(self.warmup, 3), "scrape_s": round(self.scrape, 3),
                "outside_server_s": round(self.outside_server, 3)}


@dataclass(frozen=True, kw_only=True)
class SpeedReport:
    rows: tuple[SpeedRow, ...]
    best: tuple[BestConfig, ...]
    draft_checks: tuple[DraftCheck, ...]
    servers_started: int
    failures: tuple[str, ...]  # servers that died or never started; their measured points are kept
    run_dir: Path
    servers_shared: int = 0  # gate servers the no-speculation points were measured on (not started here)
    records: tuple[Path, ...] = ()
    timing: Timing = field(default_factory=Timing)

    @property
    def exit_code(self) -> ExitCode:
        """The most serious outcome's code (`hfrelease.verdicts.severity`): a dead server, a void point, a
        failed draft gate."""
        return severity.exit_code([*(["server"] if self.failures else []), *(r.status for r in self.rows),
                                   *(c.verdict for c in self.draft_checks)])

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_code": int(self.exit_code), "servers_started": self.servers_started,
            "servers_shared": self.servers_shared,
            "failures": list(self.failures), "run_dir": str(self.run_dir),
            "rows": [r.as_dict() for r in self.rows], "best": [b.as_dict() for b in self.best],
            "draft_checks": [c.as_dict() for c in self.draft_checks], "timing": self.timing.as_dict(),
        }


def vllm_executable() -> str:
    from hfrelease.evaluation.runner import vllm_executable as beside

    return beside()


def run_speed(
    plan: SpeedPlan,
    *,
    ledger: Ledger,
    run_dir: Path,
    events: SpeedEvents | None = None,
    base_env: Mapping[str, str] | None = None,
    bench_runner: bench.BenchRunner = bench.run_in_process,
    preload: bool | None = None,
) -> SpeedReport:
    """Measure every pending point of `plan`, record each, then compute speedups, best configs, draft gates.

    `preload` imports vLLM's benchmark module while the first server starts (default: when the runner is
    the in-process one; a runner that wraps it passes True).
    """
    session = SpeedSession(plan, ledger=ledger, run_dir=run_dir, events=events, base_env=base_env,
                           bench_runner=bench_runner, preload=preload)
    session.run_remaining()
    return session.report()


class SpeedSession:
    """One run of the speed anchors, which may begin on servers started by someone else.

    `hfrelease eval --speed` starts each artifact's gate server once; that server is exactly the
    no-speculation speed server (same `vllm serve` command), so `measure_on` measures its points there
    before it is stopped, and `run_remaining` starts servers only for what is left. Each server start
    costs about a minute on a 2-core CPU: sharing saves one per artifact.
    """

    def __init__(
        self, plan: SpeedPlan, *, ledger: Ledger, run_dir: Path, events: SpeedEvents | None = None,
        base_env: Mapping[str, str] | None = None, bench_runner: bench.BenchRunner = bench.run_in_process,
        preload: bool | None = None,
    ) -> None:
        self.plan = plan
        self.ledger = ledger
        self.run_dir = run_dir
        self.events: SpeedEvents = events or NullSpeedEvents()
        self.base_env = base_env
        self.bench_runner = bench_runner
        self.timing = Timing()
        self.written: list[Path] = []
        self.measured: dict[str, LedgerRecord] = {}
        self.failures: list[str] = []
        self.started = 0
        self.shared = 0
        self._done: set[str] = set()  # labels of server jobs already measured (on a shared server)
        self._wall = 0.0  # time spent in measure_on and run_remaining (not in a shared server's gates)
        self._preload = bench_runner is bench.run_in_process if preload is None else preload
        self._importer: threading.Thread | None = None
        run_dir.mkdir(parents=True, exist_ok=True)

    def shareable(self, artifact_id: str, command: ServeCommand) -> SpeedServerJob | None:
        """The pending no-speculation job of `artifact_id` when `command` serves it exactly as that job would."""
        for job in self.plan.servers:
            if job.artifact.id != artifact_id or job.speculative is not None or not job.pending:
                continue
            if job.label in self._done or job.model_dir is None:
                return None
            ours = serve_command(self.plan, job, port=0, vllm=command.argv[0])
            if _without_port(ours.argv) == _without_port(command.argv) and dict(ours.env) == dict(command.env):
                return job
        return None

    def measure_on(self, job: SpeedServerJob, server: VllmServer, command: ServeCommand,
                   events: SpeedEvents | None = None) -> None:
        """Measure `job`'s pending points on a server someone else started (and will stop)."""
        began = time.monotonic()
        self.shared += 1
        try:
            self._measure_job(job, server, command, events or self.events)
        finally:
            self._wall += time.monotonic() - began

    def run_remaining(self) -> None:
        """Start a server for every job with pending points not measured yet, measure them, stop it."""
        # vLLM logs to stdout, also while it is imported in the thread below: for the whole run descriptors
        # 1 and 2 go to the run's log, so `--json` output stays clean (the live view has its own descriptor).
        began = time.monotonic()
        with bench.output_to(self.run_dir / "bench.log"):
            left = [job for job in self.plan.servers if job.label not in self._done]
            if self._preload and any(job.pending for job in left):
                # vLLM's benchmark module takes ~15 s to import on a 2-core machine: import it while the
                # first server starts (start-up is waiting anyway) instead of on the measured path. (Not
                # during a shared gate server's gates: the import's redirected descriptors would race
                # lm-eval's.)
                self._importer = threading.Thread(target=bench.import_benchmark, name="import-vllm-bench",
                                                  daemon=True)
                self._importer.start()
            try:
                for job in left:
                    self._run_job(job)
            finally:
                self._wall += time.monotonic() - began

    def _run_job(self, job: SpeedServerJob) -> None:
        events = self.events
        if not job.pending:
            events.server_state(job.label, "recorded")
            return
        try:
            server, command = _start(self.plan, job, run_dir=self.run_dir, events=events,
                                     base_env=self.base_env, timing=self.timing)
        except ServerError as exc:
            self.failures.append(f"{job.label}: {exc.message}")
            events.server_state(job.label, "failed to start")
            return
        self.started += 1
        try:
            self._measure_job(job, server, command, events)
        finally:
            events.server_state(job.label, "stopping")
            stop_started = time.monotonic()
            server.stop()
            self.timing.server_stop += time.monotonic() - stop_started
            events.server_state(job.label, "stopped")

    def _measure_job(self, job: SpeedServerJob, server: VllmServer, command: ServeCommand,
                     events: SpeedEvents) -> None:
        self._done.add(job.label)
        # vLLM's benchmark prints to stdout: descriptors 1 and 2 go to the run's log while it runs, so
        # `--json` output stays clean (the live views draw on their own descriptor).
        with bench.output_to(self.run_dir / "bench.log"):
            if self._importer is not None:
                self._importer.join()
                self._importer = None
            try:
                for point in job.pending:
                    record, files = _measure(self.plan, job, point, server=server, command=command,
                                             run_dir=self.run_dir, events=events, bench_runner=self.bench_runner,
                                             timing=self.timing)
                    if job.speculative is not None:
                        # Its outputs against no speculation's (measured first: none's servers come first).
                        baseline = baseline_record(self.plan, job, point, self.measured)
                        record = with_output_match(record, files, baseline, self.ledger)
                    self.written += write_point(self.ledger, record, files)
                    self.measured[point.input_key] = record
            except ServerError as exc:
                # Points finished before the death are already in the ledger; the report names the failure.
                self.failures.append(f"{job.label}: {exc.message}")
                events.server_state(job.label, "died")

    def report(self) -> SpeedReport:
        """Speedups, best configs (recorded as speed-best records) and draft gates over every point."""
        self.timing.wall = self._wall
        rows = with_speedups(_rows(self.plan, self.measured))
        points = [self.measured.get(p.input_key, p.recorded) for j in self.plan.servers for p in j.points]
        # Every verdict below is judged against what varies between server sessions on this host, measured
        # from the ledger's A/A groups (`hfrelease.speed.noise`).
        noise = host_noise(self.ledger.records(), [r for r in points if r is not None])
        best = best_configs(self.plan.manifest, rows, noise)
        # The best config per workload is recorded in the ledger too (a "speed-best" record, derived from the speed
        # records of the rows; one recorded from the same records is reused); the draft gates are judged anew.
        written = self.written + record_best_configs(self.ledger, best, [r for r in points if r is not None])
        served_reference = any(j.artifact.kind == "reference" for j in self.plan.servers)
        report = SpeedReport(rows=tuple(rows), best=tuple(best), draft_checks=(
                             *draft_checks(self.plan.manifest, rows, noise),
                             *own_head_checks(self.plan.manifest, rows, reference_measured=served_reference)),
                             servers_started=self.started, servers_shared=self.shared,
                             failures=tuple(self.failures), run_dir=self.run_dir, records=tuple(written),
                             timing=self.timing)
        # The run directory keeps the verdicts as decided, beside the logs.
        write_atomic(self.run_dir / "speed-report.json",
                     json.dumps(report.as_dict(), indent=2, default=str).encode())
        return report


def _without_port(argv: Sequence[str]) -> list[str]:
    """`argv` with the value of `--port` blanked: two servers of one configuration differ only there."""
    words = list(argv)
    return [("*" if i > 0 and words[i - 1] == "--port" else word) for i, word in enumerate(words)]


def _rows(plan: SpeedPlan, measured: Mapping[str, LedgerRecord]) -> list[SpeedRow]:
    rows: list[SpeedRow] = []
    for job in plan.servers:
        for point in job.points:
            if point.input_key in measured:
                rows.append(row_from_record(measured[point.input_key], origin="measured"))
            elif point.recorded is not None:
                rows.append(row_from_record(point.recorded, origin="recorded"))
    return rows


def serve_command(plan: SpeedPlan, job: SpeedServerJob, *, port: int, vllm: str = "vllm") -> ServeCommand:
    """The command that serves `job` on `port`: what the runner starts and what --dry-run prints (from its
    local files, or from the pinned Hub commits when a dry run has not downloaded them)."""
    files = model_files(job.artifact, job.model_dir)
    draft = model_files(job.draft, job.draft_dir) if job.draft else None
    command = build_serve_command(plan.manifest, job.artifact, model=files.name, revision=files.revision,
                                  speculative=job.speculative, draft_model=draft.name if draft else None,
                                  draft_revision=draft.revision if draft else None, host="127.0.0.1", port=port,
                                  vllm=vllm)
    command = with_emulation(command, job.artifact)
    if job.speculative is None:
        return command  # vLLM refuses the option below without speculation
    # Each answer then carries its own verify steps (`metrics.speculative_decoding`): the per-request pass's
    # acceptance (`hfrelease.speed.per_request`). A measurement option, not a serving one: the card's
    # command (`job.public`) leaves it out.
    return replace(command, argv=(*command.argv, "--per-request-spec-decode-metrics", "detailed"))


def _start(
    plan: SpeedPlan, job: SpeedServerJob, *, run_dir: Path, events: SpeedEvents,
    base_env: Mapping[str, str] | None, timing: Timing,
) -> tuple[VllmServer, ServeCommand]:
    port = free_port()
    command = serve_command(plan, job, port=port, vllm=vllm_executable())
    if command.plugin:
        events.server_state(job.label, "installing plugin")
        ensure_plugin(plan.manifest.resolve(command.plugin), echo=events.log)
    ensure_route(command, echo=events.log)
    log_path = run_dir / f"{job.artifact.id}.{job.spec_id}.server.log"
    begun = time.monotonic()
    try:
        server = launch(command, log_path=log_path, port=port, base_env=base_env,
                        state=lambda text: events.server_state(job.label, text), log=events.log)
    finally:
        timing.server_start += time.monotonic() - begun
    return server, command


def _write_sweep_prompts(plan: SpeedPlan, job: SpeedServerJob, point: PointJob, run_dir: Path) -> None:
    from hfrelease.speed.context import context_prompts, load_tokenizer

    assert point.input_len is not None
    tokenizer = load_tokenizer(model_files(job.artifact, job.model_dir).local_dir)
    target = sweep_prompts(job, point, run_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(context_prompts(plan.manifest.resolve(point.workload.prompts), tokenizer=tokenizer,
                                       input_len=point.input_len, count=point.num_prompts))


def _snapshot(server: VllmServer, base_url: str, timing: Timing) -> str:
    started = time.monotonic()
    try:
        return scrape(base_url)
    except OSError as exc:
        # A dead (or dying: its refused connection can come before the process is seen gone) server is a
        # server failure, not a measurement one.
        if (died := server.death_behind(exc)) is not None:
            raise died from None
        raise MeasurementError(f"{base_url}/metrics did not answer: {exc}") from None
    finally:
        timing.scrape += time.monotonic() - started


BENCH_START_SECONDS = 60.0  # the benchmark's own start: its tokenizer and prompt set loaded


def bench_time_limit(point: PointJob, requests: int) -> float:
    """How long one `vllm bench serve` invocation of `requests` requests of `point` may take: a request
    timeout per wave of `concurrency` requests, one more for the benchmark's own readiness request, and a
    minute for it to start."""
    waves = math.ceil(requests / point.concurrency) + 1
    return waves * workload_request_timeout(point.workload) + BENCH_START_SECONDS


def _bench(
    server: VllmServer, runner: bench.BenchRunner, argv: Sequence[str], log_path: Path, *, point: PointJob,
    requests: int,
) -> None:
    """Run one benchmark invocation with every wait bounded: the server's death (exit 5), a stall (no token
    counted on /metrics for the stall window: exit 5) and the invocation's time limit (a void point)."""
    # vLLM's benchmark gives each request six hours (aiohttp's total timeout, not settable from its
    # command line), so the bounds are kept from outside: the watchdogs interrupt the main thread.
    alarm = server.alarm
    timeout = workload_request_timeout(point.workload)
    progress = Progress()
    progress.update(0, 1)  # the benchmark's requests are outstanding for its whole run
    watch = StallWatch(base_url=server.endpoint.base_url, progress=progress, alarm=alarm,
                       window=stall_window(timeout), fallback_window=timeout)
    limit = bench_time_limit(point, requests)
    deadline = threading.Timer(limit, lambda: alarm.ring(MeasurementError(
        f"vllm bench serve ({requests} requests at concurrency {point.concurrency}) did not finish within "
        f"{limit:.0f} s", hint=f"Raise request_timeout of workload {point.workload.id!r} (now {timeout:g} s).")))
    deadline.daemon = True
    server.arm()
    try:
        with watch:
            deadline.start()
            runner(argv, log_path)
    except KeyboardInterrupt:
        # A watchdog interrupts the main thread when the server dies or stalls mid-benchmark, or time is up.
        if server.died is not None:
            raise server.died from None
        if alarm.reason is not None:
            raise alarm.reason from None
        raise
    finally:
        deadline.cancel()
        server.disarm()
    server.check_alive()


def _per_request(plan: SpeedPlan, job: SpeedServerJob, point: PointJob, *, server: VllmServer, run_dir: Path,
                 events: SpeedEvents) -> PerRequest | None:
    """The point's per-request pass (`hfrelease.speed.per_request`), for the points that have one."""
    if not wants_requests(job, point):
        return None
    events.point_progress(job.label, point.label, f"each of {point.num_prompts} prompts alone")
    request = bench_request(plan, job, point, base_url=server.endpoint.base_url, run_dir=run_dir)
    depth = job.speculative.num_speculative_tokens if job.speculative else 0
    found = send_each(request, timeout=workload_request_timeout(point.workload), depth=depth)
    server.check_alive()
    return found


def _measure(
    plan: SpeedPlan, job: SpeedServerJob, point: PointJob, *, server: VllmServer, command: ServeCommand,
    run_dir: Path, events: SpeedEvents, bench_runner: bench.BenchRunner, timing: Timing,
) -> tuple[LedgerRecord, list[tuple[str, bytes]]]:
    workload = point.workload
    base_url = server.endpoint.base_url
    steps = point_steps(plan, job, point, base_url=base_url, run_dir=run_dir, vllm=vllm_executable())
    steps[0].result.parent.mkdir(parents=True, exist_ok=True)
    if point.input_len:
        _write_sweep_prompts(plan, job, point, run_dir)
    log_path = run_dir / "bench.log"
    started_at, t0 = now_utc_iso(), time.monotonic()
    repeats: list[Repeat] = []
    raw: list[tuple[str, bytes, bytes]] = []  # (bench command, result bytes, metrics snapshots)
    failure: str | None = None
    try:
        after: str | None = None
        for step in steps:
            if step.repeat is None:
                events.point_progress(job.label, point.label, f"warm-up ({step.requests} requests)")
                _bench(server, bench_runner, step.argv, log_path, point=point, requests=step.requests)
                timing.warmup += bench.load_result(step.result)[0].duration_s
                continue
            events.point_progress(job.label, point.label, f"repeat {step.repeat + 1}/{workload.repeats}")
            # Repeats follow each other with nothing in between: the snapshot after one is the one
            # before the next.
            before = after if after is not None else _snapshot(server, base_url, timing)
            _bench(server, bench_runner, step.argv, log_path, point=point, requests=step.requests)
            after = _snapshot(server, base_url, timing)
            result, content = bench.load_result(step.result)
            timing.measured += result.duration_s
            model = job.artifact.repo
            delta = parse_counters(after, model_name=model) - parse_counters(before, model_name=model)
            repeats.append(Repeat(result=result, spec=delta))
            kept = relevant_lines(before), relevant_lines(after)
            snapshots = f"# before\n{kept[0]}# after\n{kept[1]}".encode() if any(kept) else b""
            raw.append((bench.display(step.argv), content, snapshots))
            events.point_progress(job.label, point.label, f"repeat {step.repeat + 1}/{workload.repeats}: "
                                                          f"{result.output_throughput:.1f} tok/s")
        per_request = _per_request(plan, job, point, server=server, run_dir=run_dir, events=events)
    except MeasurementError as exc:
        # The benchmark itself failed (bad arguments, unreadable result): this point is void, the server
        # and the other points are fine.
        failure, per_request = exc.message, None
    summary = summarise(repeats) if repeats else None
    files = raw_files(point, raw)
    record = point_record(plan, job, point, summary, raw, files, command=command, started_at=started_at,
                     duration=time.monotonic() - t0, failure=failure, memory=server.memory(),
                     served=server.runtime())
    if per_request is not None:
        name, data = requests_file(point, per_request.to_jsonl())
        files.append((name, data))
        record = record.model_copy(update={"extra": {**record.extra, **requests_extra(per_request, name)}})
    text = (f"{record.metrics['output_throughput'].value:.1f} tok/s" if record.status == "ok"
            else f"void: {record.void_reason}")
    short = short_outputs(record) if record.status == "ok" else None
    if short is not None:  # in the point's row too, which the live view keeps; its log keeps the last lines only
        text += f" (short outputs: {record.extra['mean_output_tokens']:g} of {workload.output_len} tokens)"
        events.log(f"warning: {job.label} {point.label}: {short}")
    events.point_progress(job.label, point.label, text)
    return record, files
