"""Run one lm-eval gate against a running OpenAI-compatible vLLM server, through lm-eval's Python API.

lm-eval's own `local-chat-completions` / `local-completions` models do the requests; hfrelease subclasses
them only to observe what lm-eval drops: each response's `finish_reason` (a gate whose answers were cut
off is a failed measurement, not a low score), empty `content` (a reasoning model that spent its whole
budget thinking), requests that failed after every attempt, and progress for the live view. Values are
taken from lm-eval's own results dict, so the number recorded is the number lm-eval reports.

Each answered request is kept on disk as it arrives (`RequestCache`: lm-eval's own request cache, its
`use_cache` sqlite file, plus each answer's finish reason, which lm-eval does not keep: an open upstream PR
would log stop reasons, https://github.com/EleutherAI/lm-evaluation-harness/pull/3709), so a gate
interrupted by a dead or stalled server, a timeout or Ctrl-C resumes from its answered requests instead
of sending them all again.

A request that fails after lm-eval's attempts does not raise out of lm-eval's asyncio tasks (one raised
error left every other task's "exception never retrieved" on the terminal and ended the run as a crash):
it is counted by kind and answered with `FAILED_ANSWER`, never a real answer, and once more fail than the
gate's `max_truncated` share allows, the rest are not sent and the gate stops with `RequestsFailedError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sqlite3
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from hfrelease.errors import MeasurementError
from hfrelease.evaluation.failures import RequestsFailedError, request_failure_kind
from hfrelease.evaluation.gate_run import GateRun
from hfrelease.evaluation.lm_eval_command import LmEvalCall
from hfrelease.evaluation.lm_eval_results import FAILED_ANSWER, collect
from hfrelease.manifest import Gate

Progress = Callable[[int, int], None]  # (requests done, requests total)


@dataclass(frozen=True, kw_only=True)
class RequestCache:
    """The answered requests of one gate run, on disk, so that an interrupted run resumes from them.

    Named by the gate's input key (artifact content, gate settings, serve command, harness versions): only a
    run of the very same measurement reads them, so a resumed result is the one an uninterrupted run makes.
    lm-eval keys each entry by the request itself (prompt and generation settings). `clear()` once the
    gate's record is written (or before a forced re-run).
    """

    directory: Path
    key: str

    @property
    def prefix(self) -> str:
        """lm-eval's `use_cache` argument: it appends `_rank<N>.db`."""
        return str(self.directory / self.key)

    @property
    def journal(self) -> Path:
        """Each answer's finish reason, one JSON line per answer, written before lm-eval caches it."""
        return self.directory / f"{self.key}.finish.jsonl"

    def databases(self) -> list[Path]:
        return sorted(self.directory.glob(f"{self.key}_rank*.db")) if self.directory.is_dir() else []

    def answered(self) -> int:
        """How many answers the cache holds (what a run now does not send)."""
        count = 0
        for db in self.databases():
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as connection:
                count += int(connection.execute('SELECT COUNT(*) FROM "unnamed"').fetchone()[0])
        return count

    def clear(self) -> None:
        for path in [*self.databases(), self.journal]:
            for companion in (path, path.with_name(path.name + "-journal"), path.with_name(path.name + "-wal")):
                with contextlib.suppress(OSError):
                    companion.unlink()


@dataclass
class _Observer:
    """Collects, from every response, whether it was cut off or empty (thread-safe: lm-eval is async)."""

    total: int = 0
    done: int = 0
    on_progress: Progress | None = None
    finish: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)
    journal: Any = None  # an open text file: each finish reason also goes there (see RequestCache)
    max_failed_share: float = 0.0  # the gate's max_truncated: failed requests past this share stop the gate
    failures: Counter[str] = field(default_factory=Counter)
    stopped: bool = False  # more requests failed than allowed: the rest are not sent

    @property
    def allowed_failures(self) -> int:
        return math.floor(self.max_failed_share * self.total)

    def failed(self, kind: str, count: int) -> None:
        with self.lock:
            self.failures[kind] += count
            self.done += count
            if sum(self.failures.values()) > self.allowed_failures:
                self.stopped = True
            if self.on_progress:
                self.on_progress(self.done, self.total)

    def seen(self, text: str | None, finish_reason: str | None) -> None:
        with self.lock:
            self.done += 1
            self.finish[text or ""].append(finish_reason or "")
            if self.journal is not None:
                # Flushed at once: the kernel keeps it even if hfrelease is killed the next moment.
                self.journal.write(json.dumps({"text": text or "", "finish": finish_reason or ""}) + "\n")
                self.journal.flush()
            if self.on_progress:
                self.on_progress(self.done, self.total)

    def recall(self, journal: Path) -> None:
        """The finish reasons of answers an interrupted run received (served now from the request cache)."""
        with contextlib.suppress(OSError), journal.open(encoding="utf-8") as lines:
            for line in lines:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    entry = json.loads(line)
                    self.finish[str(entry["text"])].append(str(entry["finish"]))

    def started(self, total: int) -> None:
        with self.lock:
            self.total += total
            if self.on_progress:
                self.on_progress(self.done, self.total)


def _failed_answers(messages: Any, generate: bool) -> list[Any]:
    """What a failed request of `len(messages)` prompts answers: no text, or a log-likelihood no choice wins on."""
    count = len(messages) if isinstance(messages, list | tuple) else 1
    return [FAILED_ANSWER if generate else (-math.inf, False)] * count


class _Held:
    """A semaphore already held by the caller: lm-eval's `amodel_call` releases only what `acquire` says it took."""

    async def acquire(self) -> bool:
        return False


_HELD = _Held()


class _Counted:
    """The request methods of lm-eval's API models, with failures counted instead of raised (a mixin).

    lm-eval retries a request by calling `amodel_call`/`model_call` again (tenacity, `max_retries` attempts in
    all) with the same `messages` object, so the attempts of one request are counted by its id: earlier
    attempts re-raise (lm-eval retries them), the last one is recorded as a failure.
    """

    observer: _Observer
    max_retries: int
    gate_id: str
    server_url: str  # the server's base URL (lm-eval's own `base_url` is the endpoint's URL: never overwrite it)
    # The artifact's budget of requests in flight, shared with the gates running beside this one (a semaphore
    # of `hfrelease.evaluation.gate_process`); None: this gate's own num_concurrent is the only limit.
    slots: Any = None
    _concurrent: int  # lm-eval's num_concurrent

    async def _take_slot(self) -> None:
        """Wait for a slot of the shared budget without blocking the event loop (the semaphore is another
        process's too: a thread waits on it). A request cancelled while waiting gives back the slot it gets."""
        pool: ThreadPoolExecutor = self.__dict__.get("_slot_pool") or self.__dict__.setdefault(
            "_slot_pool", ThreadPoolExecutor(max_workers=max(1, self._concurrent), thread_name_prefix="slot"))
        waiting: Future[bool] = pool.submit(self.slots.acquire)
        try:
            await asyncio.wrap_future(waiting)
        except asyncio.CancelledError:
            waiting.add_done_callback(lambda f: self.slots.release() if not f.cancelled() and f.result() else None)
            raise

    def _last_attempt(self, messages: Any) -> bool:
        attempts: dict[int, int] = self.__dict__.setdefault("_attempts", {})
        attempts[id(messages)] = attempts.get(id(messages), 0) + 1
        if attempts[id(messages)] < self.max_retries and not self.observer.stopped:
            return False
        del attempts[id(messages)]
        return True

    def _done(self, messages: Any) -> None:
        self.__dict__.setdefault("_attempts", {}).pop(id(messages), None)

    async def amodel_call(self, *args: Any, **kwargs: Any) -> Any:
        messages = kwargs["messages"] if "messages" in kwargs else args[2]
        generate = bool(kwargs.get("generate", True))
        # lm-eval starts every request's task at once and each waits on its semaphore inside amodel_call, so a
        # check made before that wait passes for all of them: the semaphore is taken here, the check made once
        # it is held (just before the request would be sent), and lm-eval's call is given one already held.
        semaphore: asyncio.Semaphore
        if "sem" in kwargs:
            semaphore, kwargs["sem"] = kwargs["sem"], _HELD
        else:
            semaphore, args = args[1], (args[0], _HELD, *args[2:])
        await semaphore.acquire()
        slot = False
        try:
            if self.observer.stopped:
                return _failed_answers(messages, generate)  # past the threshold: not sent
            if self.slots is not None:
                await self._take_slot()
                slot = True
                if self.observer.stopped:  # the threshold was passed while this one waited for a slot
                    return _failed_answers(messages, generate)
            result = await super().amodel_call(*args, **kwargs)  # type: ignore[misc]
        except Exception as error:
            if not self._last_attempt(messages):
                raise
            self.observer.failed(request_failure_kind(error), len(messages))
            return _failed_answers(messages, generate)
        finally:
            if slot:
                self.slots.release()
            semaphore.release()
        self._done(messages)
        return result

    def model_call(self, *args: Any, **kwargs: Any) -> Any:
        # lm-eval's sequential path (num_concurrent = 1) has no answer to stand in for a failed request (it
        # parses the response after this returns): the first request that fails after every attempt stops it.
        messages = kwargs["messages"] if "messages" in kwargs else args[0]
        if self.slots is not None:
            self.slots.acquire()
        try:
            result = super().model_call(*args, **kwargs)  # type: ignore[misc]
        except Exception as error:
            if not self._last_attempt(messages):
                raise
            self.observer.failed(request_failure_kind(error), len(messages))
            raise self.failure(sequential=True) from None
        finally:
            if self.slots is not None:
                self.slots.release()
        self._done(messages)
        return result

    def failure(self, *, sequential: bool = False) -> RequestsFailedError:
        failed = sum(self.observer.failures.values())
        return RequestsFailedError(gate=self.gate_id, failed=failed, total=self.observer.total,
                                   kinds=self.observer.failures, attempts=self.max_retries,
                                   allowed=self.observer.allowed_failures, base_url=self.server_url,
                                   sequential=sequential)  # fmt: skip

    def checked(self, answers: list[Any]) -> list[Any]:
        if self.observer.stopped:
            raise self.failure()
        return answers


@cache
def _model_classes() -> tuple[type[Any], type[Any]]:
    """lm-eval model classes that report to an `_Observer` (built lazily: lm-eval is a heavy import)."""
    from lm_eval.models.api_models import LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER as NONE_PLACEHOLDER
    from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI

    class ObservedChat(_Counted, LocalChatCompletion):  # type: ignore[misc]
        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            self.observer.started(len(requests))
            return self.checked(list(super().generate_until(requests, disable_tqdm=True)))

        def parse_generations(self, outputs: dict[str, Any] | list[dict[str, Any]], **kwargs: Any) -> list[str]:
            parsed: list[str | None] = super().parse_generations(outputs, **kwargs)
            choices = [
                c for out in (outputs if isinstance(outputs, list) else [outputs])
                for c in sorted(out.get("choices", []), key=lambda c: c.get("index", 0))
            ]
            for text, choice in zip(parsed, choices, strict=False):
                # Keyed by the text lm-eval will log as the response (None becomes its placeholder), so
                # each sample can be matched with its finish_reason afterwards.
                self.observer.seen(NONE_PLACEHOLDER if text is None else text, choice.get("finish_reason"))
            return parsed  # type: ignore[return-value]

    class ObservedCompletions(_Counted, LocalCompletionsAPI):  # type: ignore[misc]
        def _loglikelihood_tokens(self, requests: list[Any], **kwargs: Any) -> list[tuple[float, bool]]:
            self.observer.started(len(requests))
            return self.checked(list(super()._loglikelihood_tokens(requests, **kwargs)))

        def parse_logprobs(self, outputs: Any, tokens: Any = None, ctxlens: Any = None, **kwargs: Any) -> Any:
            result = super().parse_logprobs(outputs, tokens=tokens, ctxlens=ctxlens, **kwargs)
            for _ in result:
                self.observer.seen("loglikelihood", "stop")
            return result

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            self.observer.started(len(requests))
            return self.checked(list(super().generate_until(requests, disable_tqdm=True)))

        def parse_generations(self, outputs: Any, **kwargs: Any) -> list[str]:
            parsed: list[str] = super().parse_generations(outputs, **kwargs)
            for out in outputs if isinstance(outputs, list) else [outputs]:
                for choice in out.get("choices", []):
                    self.observer.seen(choice.get("text"), choice.get("finish_reason"))
            return parsed

    return ObservedChat, ObservedCompletions



def run_lm_eval_gate(
    gate: Gate, call: LmEvalCall, *, on_progress: Progress | None = None, cache: RequestCache | None = None,
    slots: Any = None,
) -> GateRun:
    """Run `call` (the lm-eval run of `gate`, from `lm_eval_call`) through lm-eval's Python API.

    Exactly what `lm_eval` does with `call.argv()`, except that hfrelease's model classes observe each
    response and nothing is written to files but the request `cache` (lm-eval's `--use_cache`, which
    changes which requests are sent, never an answer). Bootstrap stderrs use lm-eval's default iteration
    count, which its command line cannot change. `slots`: the budget of requests in flight this gate shares
    with the artifact's other gates (each request holds one while it is sent and answered).
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    from hfrelease.evaluation.task_index import install

    install()  # lm-eval's own tasks indexed once per process, not once per gate
    chat_cls, completions_cls = _model_classes()
    classes = {"local-chat-completions": chat_cls, "local-completions": completions_cls}
    observer = _Observer(on_progress=on_progress, max_failed_share=gate.max_truncated)
    lm = classes[call.model](**call.model_args)
    lm.observer, lm.gate_id, lm.server_url = observer, gate.id, call.model_args["base_url"].rsplit("/v1/", 1)[0]
    lm.slots = slots
    # lm-eval's command line gives the task manager the model arguments as metadata (EvaluatorConfig).
    metadata = dict(call.model_args)
    task_manager = TaskManager(include_path=call.include_path, metadata=metadata)
    resumed = 0
    with contextlib.ExitStack() as stack:
        options: dict[str, Any] = {}
        if cache is not None:
            cache.directory.mkdir(parents=True, exist_ok=True)
            resumed = cache.answered()
            if resumed:
                observer.recall(cache.journal)
            observer.journal = stack.enter_context(cache.journal.open("a", encoding="utf-8"))
            options["use_cache"] = cache.prefix
        results = lm_eval.simple_evaluate(model=lm, tasks=list(call.tasks), task_manager=task_manager,
                                          metadata=metadata, **call.evaluate, **options)
    if results is None:
        raise MeasurementError(f"lm-eval returned no results for {gate.task}")
    return replace(collect(gate, results, finish=observer.finish, requests=observer.done,
                           failures=observer.failures), resumed=resumed)
