"""Measuring one server job's pending gates: the `GateContext` both schedules use (this sequential one and
`hfrelease.evaluation.schedule`'s concurrent one), each gate watched by the watchdogs and its failure
classified, and each finished gate recorded at once."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.custom_gate import run_custom_gate
from hfrelease.evaluation.events import EvalEvents
from hfrelease.evaluation.failures import RequestsFailedError, classify_gate_failure
from hfrelease.evaluation.fidelity_gate import (
    artifact_lines,
    fidelity_run,
    post_json,
    read_raw,
    reference_lines,
)
from hfrelease.evaluation.gate_run import GateRun
from hfrelease.evaluation.judging import RunKey, reference_record
from hfrelease.evaluation.lm_eval_command import LmEvalCall
from hfrelease.evaluation.lm_eval_gate import RequestCache, run_lm_eval_gate
from hfrelease.evaluation.logs import stderr_to
from hfrelease.evaluation.plan import (
    GateJob,
    ModelFiles,
    ServerJob,
    gate_call,
    model_files,
)
from hfrelease.evaluation.records import gate_record
from hfrelease.evaluation.timeouts import MAX_RETRIES, gate_request_timeout, stall_window
from hfrelease.evaluation.utilization import LoadWatch
from hfrelease.files.atomic import write_atomic
from hfrelease.files.hashing import HashCache
from hfrelease.ledger.provenance import now_utc_iso
from hfrelease.ledger.record import LedgerRecord, raw_files
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Gate, Manifest
from hfrelease.manifest.gate_rules import read_prompt_set
from hfrelease.serving.alarm import Alarm
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.process import VllmServer
from hfrelease.serving.stall import Progress, StallWatch


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
        record = gate_record(self.manifest, job, gate_job, run, command=self.command, base_url=self.base_url,
                         started_at=started_at, duration=duration, failure=failure,
                         memory=self.server.memory() if self.server is not None else None, raw_name=raw_name,
                         served=self.server.runtime() if self.server is not None else None,
                         schedule=schedule, load=load)
        path = self.ledger.write(record)
        if self.request_cache is not None:
            RequestCache(directory=self.request_cache, key=gate_job.input_key).clear()  # the record holds them now
        self.measured[(aid, gate.id, gate.seed)] = record
        summary = f"{run.value:.3f} (n={run.n})" if record.status == "ok" else f"void: {record.void_reason}"
        self.events.gate_finished(aid, gate_job.label, summary)
        return path


def run_gates(
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
    reference = measured.get((manifest.reference.id, gate.id, gate.seed)) or reference_record(
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
