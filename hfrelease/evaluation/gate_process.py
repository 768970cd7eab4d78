"""One lm-eval gate in a process of its own, so that several gates of an artifact can run at once.

lm-eval keeps global state: `simple_evaluate` seeds Python's, NumPy's and torch's global generators when
it starts, and a task may draw from them while it builds its requests; two gates in threads of one process
would draw from the same generators in an order nobody chose, and the samples and seeds would no longer be
those of a run of that gate alone. lm-eval's request loop also runs inside `asyncio.run`, which only the
main thread's Ctrl-C (the watchdogs' `interrupt_main`) can end. In a process of its own, a gate is exactly
the run it is alone, and stopping it is a signal.

The processes are forked from one forkserver (multiprocessing's), which imports lm-eval and builds its task
index once (`gate_forkserver`): a gate starts in milliseconds, not the seconds lm-eval's import and index
take. Each process shares the artifact's budget of requests in flight (a semaphore): a request waits for a
slot before it is sent, so that the gates together never keep more requests in flight than the budget
(`request_slots`). It reports over a pipe: progress as `("progress", done, total)`, then
`("result", GateRun)` or `("error", GateWorkerFailure)`.

A gate process holds no credential: its environment is hfrelease's less every variable `hfrelease.redact`
treats as a secret (`public_environment`), and the forkserver it is forked from has removed the secrets it
inherited from its own environment, memory included (`gate_forkserver`), so neither `os.environ` nor
`/proc/self/environ` of a gate shows HF_TOKEN.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.failures import RequestsFailedError
from hfrelease.evaluation.lm_eval_command import LmEvalCall
from hfrelease.evaluation.lm_eval_gate import RequestCache
from hfrelease.manifest import Gate
from hfrelease.redact import public_environment

# Imported by the forkserver before it forks any gate (what every gate would otherwise import itself).
# What a gate imports on its first run (measured: loading a completions gate's tokenizer imports transformers and
# torch, 8.6 s on 2 busy cores), imported once here rather than in every gate's process. `gate_forkserver` comes
# first: it removes the forkserver's credentials before any other module is imported.
PRELOAD = ["hfrelease.evaluation.gate_forkserver", "hfrelease.evaluation.gate_process", "lm_eval",
           "lm_eval.models.openai_completions", "lm_eval.tasks", "lm_eval.evaluator", "lm_eval.api.metrics",
           "lm_eval.filters", "torch", "transformers", "transformers.models.auto.tokenization_auto",
           "transformers.tokenization_utils_fast", "jinja2"]
STOP_GRACE_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class GateWorkerFailure:
    """How a gate's process failed, as plain data (hfrelease's errors take keyword arguments that pickle drops)."""

    kind: str  # "requests_failed", "measurement", "other"
    message: str
    hint: str | None = None
    fields: dict[str, Any] | None = None  # RequestsFailedError's arguments
    names: tuple[str, ...] = ()  # the classes of the exception and those it was raised from
    timed_out: bool = False
    connection: bool = False

    def error(self) -> BaseException:
        """The exception the gate raised, as the runner classifies it (timeouts and connection errors kept)."""
        if self.kind == "requests_failed" and self.fields is not None:
            return RequestsFailedError(**self.fields)
        if self.kind == "measurement":
            return MeasurementError(self.message, hint=self.hint)
        error = GateWorkerError(f"{self.names[0] if self.names else 'error'}: {self.message}")
        if self.timed_out:
            error.__cause__ = TimeoutError(self.message)
        elif self.connection:
            error.__cause__ = ConnectionError(self.message)
        return error


class GateWorkerError(Exception):
    """An unexpected exception in a gate's process, re-raised in hfrelease with its class name and message."""


def _failure(exc: BaseException) -> GateWorkerFailure:
    from hfrelease.serving.process import is_connection_error

    names: list[str] = []
    timed_out = False
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names.append(type(current).__name__)
        timed_out = timed_out or isinstance(current, TimeoutError)
        current = current.__cause__ or current.__context__
    if isinstance(exc, RequestsFailedError):
        fields = {"gate": exc.gate, "failed": exc.failed, "total": exc.total, "kinds": exc.kinds,
                  "attempts": exc.attempts, "allowed": exc.allowed, "base_url": exc.base_url,
                  "sequential": exc.sequential}
        return GateWorkerFailure(kind="requests_failed", message=exc.message, fields=fields)
    if isinstance(exc, MeasurementError):
        return GateWorkerFailure(kind="measurement", message=exc.message, hint=exc.hint)
    return GateWorkerFailure(kind="other", message=str(exc), names=tuple(names), timed_out=timed_out,
                             connection=is_connection_error(exc))


def _context() -> ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    assert isinstance(context, ForkServerContext)
    context.set_forkserver_preload(PRELOAD)
    return context


def request_slots(in_flight: int) -> Any:
    """The budget's semaphore, shared with every gate process started by `start_gate`."""
    return _context().BoundedSemaphore(in_flight)


def start_gate(
    gate: Gate, call: LmEvalCall, *, cache: RequestCache | None, log_path: Path, slots: Any,
) -> tuple[BaseProcess, Connection]:
    """Start `call` (the lm-eval run of `gate`) in a process of its own; its end of the pipe to read from."""
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_main, name=f"gate-{gate.id}", daemon=True,
                              args=(gate, call, cache, str(log_path), slots, sender, public_environment()))
    process.start()
    sender.close()  # the child holds its own copy: the parent's read sees EOF when the child is gone
    return process, receiver


def stop_gate(process: BaseProcess) -> None:
    """Stop a gate's process (SIGTERM, then SIGKILL): its answered requests stay in its request cache."""
    if process.is_alive():
        process.terminate()
        process.join(STOP_GRACE_SECONDS)
    if process.is_alive():
        process.kill()
        process.join(STOP_GRACE_SECONDS)


def _main(gate: Gate, call: LmEvalCall, cache: RequestCache | None, log_path: str, slots: Any, sender: Connection,
          environment: dict[str, str]) -> None:
    # The parent stops a gate (its watchdogs, Ctrl-C): a terminal's Ctrl-C reaches this process too, and is
    # left to the parent, which knows why the gate is stopped.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    os.environ.clear()
    # hfrelease's environment now, less every secret (`start_gate`): the forkserver's is the one it started with,
    # and lm-eval and the task's own code run here.
    os.environ.update(environment)
    target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, 1)  # lm-eval's progress bars and the `git` it runs for provenance: into the run's log
    os.dup2(target, 2)
    os.close(target)
    from hfrelease.evaluation.lm_eval_gate import run_lm_eval_gate
    from hfrelease.evaluation.logs import route_lm_eval_logs

    route_lm_eval_logs(Path(log_path))

    def on_progress(done: int, total: int) -> None:
        sender.send(("progress", done, total))

    try:
        run = run_lm_eval_gate(gate, call, on_progress=on_progress, cache=cache, slots=slots)
    except BaseException as exc:  # every failure is reported to the parent, which classifies it
        sender.send(("error", _failure(exc)))
    else:
        sender.send(("result", run))
    finally:
        sender.close()


def _die_with_parent() -> None:
    """SIGKILL this process when its parent (the forkserver, which exits with hfrelease) is gone."""
    from hfrelease.serving.orphans import die_with_parent

    preexec: Callable[[], None] | None = die_with_parent()
    if preexec is not None:
        preexec()
