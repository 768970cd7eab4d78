"""The concurrent schedule: an artifact's gates run at once against its server, within one budget of requests.

One gate alone leaves most of a server's batch idle: its last requests trickle in one by one, and between
its requests lm-eval builds prompts, loads data and scores. Run together, the gates fill each other's gaps,
and the server works at the concurrency where it is fastest (`hfrelease.evaluation.budget`). Each request
takes a slot of the artifact's budget before it is sent, so together the gates never keep more requests in
flight than the budget.

Each lm-eval gate runs in a process of its own (`gate_process`: lm-eval's global seeding and its asyncio loop
make threads unsafe), so its samples and seeds are those of a run alone; custom and fidelity gates run in
threads of this process and hold slots while they run: a fidelity gate one, a custom gate its declared
`num_concurrent` (the requests its command sends at once; at most the whole budget, `gate_slots`). What stays
as in the sequential schedule: each gate is recorded the moment it finishes; its answered requests are in its
request cache as they arrive; one stall watchdog watches all of them (progress summed over the gates) and the
server's watchdog its death, both by interrupting the main thread, which then stops every gate's process. A
gate whose requests failed or timed out lets the others finish and be recorded before its error is raised; a
dead or stalled server stops them all at once. At most `MAX_GATES` gates run at a time (each lm-eval process
holds its task data); the rest start as others finish.

Batch composition can change a greedy answer (the same request batched with different neighbours takes
other kernels' rounding paths), so a concurrent run may differ from a sequential one in a few samples:
each record keeps the schedule it ran under (`extra.schedule`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hfrelease.errors import ServerError
from hfrelease.evaluation.gate_process import GateWorkerError, GateWorkerFailure, request_slots, start_gate, stop_gate
from hfrelease.evaluation.logs import stderr_to
from hfrelease.evaluation.timeouts import gate_request_timeout, stall_window
from hfrelease.ledger.provenance import now_utc_iso
from hfrelease.serving.stall import Progress, StallWatch

if TYPE_CHECKING:
    from hfrelease.errors import MeasurementError
    from hfrelease.evaluation.gate_run import GateRun
    from hfrelease.evaluation.lm_eval_command import LmEvalCall
    from hfrelease.evaluation.lm_eval_gate import RequestCache
    from hfrelease.evaluation.plan import GateJob, ServerJob
    from hfrelease.manifest import Gate
    from hfrelease.serving.alarm import Alarm

MAX_GATES = 6
POLL_SECONDS = 0.25


class GateProgress(Protocol):
    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None: ...


class GateContext(Protocol):
    """The runner's side of measuring one server job's gates (`hfrelease.evaluation.server_job.GateContext`)."""

    @property
    def job(self) -> ServerJob: ...
    @property
    def base_url(self) -> str: ...
    @property
    def log_dir(self) -> Path: ...
    @property
    def events(self) -> GateProgress: ...
    @property
    def alarm(self) -> Alarm: ...
    def request_cache_of(self, gate_job: GateJob) -> RequestCache | None: ...
    def lm_eval_call(self, gate_job: GateJob, num_concurrent: int | None = None) -> LmEvalCall: ...
    def measure(self, gate_job: GateJob, cache: RequestCache | None, on_progress: Any, *,
                redirect: bool = True) -> GateRun: ...
    def interrupted(self) -> BaseException | None: ...
    def failed(self, gate: Gate, exc: Exception) -> tuple[GateRun, MeasurementError]: ...
    def finish(self, gate_job: GateJob, run: GateRun, failure: MeasurementError | None, *, started_at: str,
               duration: float, schedule: Mapping[str, Any] | None = None) -> Path: ...


@dataclass(kw_only=True)
class _Running:
    """A gate under way: in its own process (lm-eval) or in a thread of this one (custom, fidelity)."""

    gate_job: GateJob
    started_at: str
    t0: float
    process: BaseProcess | None = None
    receiver: Connection | None = None
    thread: threading.Thread | None = None
    outcome: tuple[str, Any] | None = None  # ("result", GateRun) or ("error", the exception)
    done: int = 0
    total: int = 0


def run_at_once(context: GateContext, *, in_flight: int) -> tuple[int, list[Path]]:
    """Measure and record every pending gate of `context.job` at once; (requests sent, records written)."""
    jobs = list(context.job.pending)
    names = [j.gate.id for j in jobs]
    slots = request_slots(in_flight)
    gathering = threading.Lock()  # one thread gate at a time gathers its slots (`holding`)
    progress = Progress()
    timeout = max(gate_request_timeout(j.gate) for j in jobs)
    # One watchdog for all: the server is stalled only when none of the gates' requests moves.
    watch = StallWatch(base_url=context.base_url, progress=progress, alarm=context.alarm,
                       window=stall_window(timeout), fallback_window=timeout)
    waiting, running = list(jobs), list[_Running]()
    requests, written = 0, list[Path]()
    first_error: BaseException | None = None
    alarm = context.alarm
    alarm.arm()
    try:
        with watch, stderr_to(context.log_dir / "lm-eval.log"):
            while waiting or running:
                while waiting and len(running) < MAX_GATES:
                    running.append(_start(context, waiting.pop(0), slots, in_flight, gathering))
                _wait(context, running)
                done, total = (sum(r.done for r in running), sum(r.total for r in running))
                progress.update(done, total)
                for item in [r for r in running if r.outcome is not None]:
                    running.remove(item)
                    run, failure = None, None
                    kind, value = item.outcome or ("error", None)
                    if kind == "result":
                        run = value
                    elif not isinstance(value, Exception):  # KeyboardInterrupt, SystemExit in a gate's thread
                        raise value if isinstance(value, BaseException) else GateWorkerError("no outcome")
                    else:
                        try:
                            run, failure = context.failed(item.gate_job.gate, value)
                        except ServerError:
                            raise  # the server is dead or stalled: every gate stops now
                        except Exception as exc:  # raised once the other gates are recorded
                            first_error = first_error or exc
                        alarm.arm()  # classifying disarmed it; the other gates still wait on the server
                    if run is None:
                        continue
                    requests += run.requests
                    beside = [n for n in names if n != item.gate_job.gate.id]
                    schedule: dict[str, Any] = {"in_flight": in_flight, "beside": beside}
                    if item.thread is not None:
                        schedule["slots"] = gate_slots(item.gate_job.gate, in_flight)
                    written.append(context.finish(item.gate_job, run, failure, started_at=item.started_at,
                                                  duration=time.monotonic() - item.t0, schedule=schedule))
    except KeyboardInterrupt:
        # A watchdog records why before it interrupts the main thread.
        reason = context.interrupted()
        if reason is not None:
            raise reason from None
        raise
    finally:
        alarm.disarm()
        for item in running:
            if item.process is not None:
                stop_gate(item.process)
    if first_error is not None:
        raise first_error
    return requests, written


def gate_slots(gate: Gate, in_flight: int) -> int:
    """The slots of the budget a gate run in a thread holds while it runs: a custom gate's declared
    `num_concurrent` (the requests it sends at once), capped at the whole budget; a fidelity gate's one (it
    sends one request at a time). An lm-eval gate takes a slot per request instead (`gate_process`)."""
    custom = gate.command is not None or gate.entry_point is not None
    return min(gate.num_concurrent, in_flight) if custom else 1


@contextmanager
def holding(slots: Any, count: int, gathering: threading.Lock) -> Iterator[None]:
    """Hold `count` slots of `slots` while the block runs. Slots are gathered under `gathering`, one gate at a
    time: two gates each holding part of what they need could otherwise wait for each other for ever."""
    with gathering:
        for _ in range(count):
            slots.acquire()
    try:
        yield
    finally:
        for _ in range(count):
            slots.release()


def _start(context: GateContext, gate_job: GateJob, slots: Any, in_flight: int,
           gathering: threading.Lock | None = None) -> _Running:
    aid, gate = context.job.artifact.id, gate_job.gate
    context.events.gate_progress(aid, gate_job.label, 0, 0)
    item = _Running(gate_job=gate_job, started_at=now_utc_iso(), t0=time.monotonic())
    cache = context.request_cache_of(gate_job)
    if gate.task is not None:
        call = context.lm_eval_call(gate_job, num_concurrent=in_flight)
        item.process, item.receiver = start_gate(gate, call, cache=cache, log_path=context.log_dir / "lm-eval.log",
                                                 slots=slots)
        return item

    def on_progress(done: int, total: int) -> None:
        item.done, item.total = done, total
        context.events.gate_progress(aid, item.gate_job.label, done, total)

    def measure() -> None:
        try:
            # Its slots for the whole gate: the requests it sends at once (`gate_slots`).
            with holding(slots, gate_slots(gate, in_flight), gathering or threading.Lock()):
                result: GateRun = context.measure(gate_job, cache, on_progress, redirect=False)
            item.outcome = ("result", result)
        except BaseException as exc:  # handed to the main thread, which classifies it
            item.outcome = ("error", exc)

    item.thread = threading.Thread(target=measure, name=f"gate-{gate.id}", daemon=True)
    item.thread.start()
    return item


def _wait(context: GateContext, running: list[_Running]) -> None:
    """Wait a moment for any gate's news; take in its progress and outcome."""
    receivers = [r.receiver for r in running if r.receiver is not None and r.outcome is None]
    if receivers:
        wait(receivers, timeout=POLL_SECONDS)
    else:
        time.sleep(POLL_SECONDS / 5)
    for item in running:
        if item.receiver is None or item.outcome is not None:
            continue
        try:
            while item.outcome is None and item.receiver.poll():
                message = item.receiver.recv()
                if message[0] == "progress":
                    item.done, item.total = message[1], message[2]
                    context.events.gate_progress(context.job.artifact.id, item.gate_job.label, item.done,
                                                 item.total)
                elif message[0] == "result":
                    item.outcome = ("result", message[1])
                elif message[0] == "error" and isinstance(message[1], GateWorkerFailure):
                    item.outcome = ("error", message[1].error())
        except (EOFError, OSError):
            # The process ended without a result (killed, out of memory): its answered requests are cached.
            assert item.process is not None
            item.process.join(1.0)
            item.outcome = ("error", GateWorkerError(
                f"the process of gate {item.gate_job.gate.id!r} ended without a result "
                f"(exit code {item.process.exitcode}); its log is {context.log_dir / 'lm-eval.log'}"))
