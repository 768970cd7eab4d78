"""How much of its server an eval used: generated tokens per second against the server's measured peak.

While an artifact's gates run, a watcher reads the server's own counters on `/metrics` (vLLM's):

    vllm:generation_tokens_total                 tokens generated (summed over engines)
    vllm:prompt_tokens_total                     tokens prefilled
    vllm:request_inference_time_seconds_sum      per request, the time it spent being computed (not queued)
    vllm:num_requests_running                    requests in the running batch now (a gauge)

From the first and last reading: the generated tokens per second over the run, which divided by the sweep's
throughput at the run's in-flight budget (`Sweep.throughput_at`) is the **utilization** (1.0: the run kept
the server as busy as the speed anchor that measured it); the **busy share**, the share of readings with a
request running (the server's own view of how long it worked); and the **mean batch**, request-seconds of
computation per second of the run (how many requests the engine computed at once, on average).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from hfrelease.serving.watch import BackgroundWatch

GENERATED = "vllm:generation_tokens_total"
PROMPT = "vllm:prompt_tokens_total"
INFERENCE_SECONDS = "vllm:request_inference_time_seconds_sum"
RUNNING = "vllm:num_requests_running"
_NAMES = (GENERATED, PROMPT, INFERENCE_SECONDS, RUNNING)
READ_EVERY_SECONDS = 0.5
READ_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class LoadReading:
    """vLLM's counters at one moment (None: the server does not expose them)."""

    at: float  # monotonic seconds
    generated: float
    prompt: float
    inference_seconds: float
    running: float


def parse_reading(text: str, *, at: float) -> LoadReading | None:
    """The load counters in a /metrics page (summed over engines and models), or None when it has none."""
    totals = dict.fromkeys(_NAMES, 0.0)
    seen = False
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            try:
                totals[name] += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
            seen = seen or name == GENERATED
    if not seen:
        return None
    return LoadReading(at=at, generated=totals[GENERATED], prompt=totals[PROMPT],
                       inference_seconds=totals[INFERENCE_SECONDS], running=totals[RUNNING])


def read_load(base_url: str, *, clock: Callable[[], float] = time.monotonic) -> LoadReading | None:
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/metrics", timeout=READ_TIMEOUT_SECONDS) as response:  # noqa: S310
            text = response.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    return parse_reading(text, at=clock())


@dataclass(frozen=True, kw_only=True)
class Utilization:
    """One run's use of its server (see the module docstring)."""

    wall_s: float
    generated_tokens: int
    prompt_tokens: int
    tokens_per_s: float
    busy_share: float | None  # share of readings with a request running; None with fewer than 2 readings
    mean_batch: float  # request-seconds computed per second of the run
    in_flight: int
    peak_tokens_per_s: float | None  # the sweep's throughput at `in_flight`; None without a sweep
    readings: int

    @property
    def ratio(self) -> float | None:
        """Generated tokens per second over the sweep's peak at the run's in-flight budget."""
        if not self.peak_tokens_per_s:
            return None
        return self.tokens_per_s / self.peak_tokens_per_s

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["utilization"] = None if self.ratio is None else round(self.ratio, 4)
        for key in ("wall_s", "tokens_per_s", "mean_batch", "peak_tokens_per_s", "busy_share"):
            if isinstance(data[key], float):
                data[key] = round(data[key], 4)
        return data

    def summary(self) -> str:
        """One line for the live view and the gate table."""
        busy = "" if self.busy_share is None else f", busy {self.busy_share:.0%}"
        if self.ratio is None:
            return f"{self.tokens_per_s:.0f} tok/s at {self.in_flight} in flight{busy} (no sweep to compare with)"
        return (f"{self.tokens_per_s:.0f} tok/s = {self.ratio:.0%} of the sweep's {self.peak_tokens_per_s:.0f} at "
                f"{self.in_flight} in flight{busy}")


def utilization(first: LoadReading, last: LoadReading, *, running_samples: list[float], in_flight: int,
                peak_tokens_per_s: float | None) -> Utilization:
    wall = max(last.at - first.at, 1e-9)
    generated = last.generated - first.generated
    return Utilization(
        wall_s=wall, generated_tokens=round(generated), prompt_tokens=round(last.prompt - first.prompt),
        tokens_per_s=generated / wall,
        busy_share=(sum(1 for r in running_samples if r > 0) / len(running_samples)
                    if len(running_samples) >= 2 else None),
        mean_batch=(last.inference_seconds - first.inference_seconds) / wall, in_flight=in_flight,
        peak_tokens_per_s=peak_tokens_per_s, readings=len(running_samples),
    )


class LoadWatch(BackgroundWatch):
    """Reads the server's load counters while a block runs (a context manager); `result()` after it.

    `on_reading(tokens_per_s)` is told the generation rate since the start at each reading (the live view).
    """

    def __init__(
        self, base_url: str, *, in_flight: int, peak_tokens_per_s: float | None,
        read: Callable[[str], LoadReading | None] = read_load, every: float = READ_EVERY_SECONDS,
        on_reading: Callable[[Utilization], None] | None = None,
    ) -> None:
        self.base_url = base_url
        self.in_flight = in_flight
        self.peak = peak_tokens_per_s
        self._read = read
        self._every = every
        self._on_reading = on_reading
        super().__init__(thread_name="load-watch", join_timeout=READ_TIMEOUT_SECONDS + 1)
        self._first: LoadReading | None = None
        self._last: LoadReading | None = None
        self._running: list[float] = []
        self._lock = threading.Lock()

    def __enter__(self) -> LoadWatch:
        self._first = self._read(self.base_url)
        if self._first is not None:
            self._start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._halt()
        if exc_type is None and self._first is not None:
            last = self._read(self.base_url)
            with self._lock:
                self._last = last or self._last

    def _watch(self) -> None:
        while not self._stop.wait(self._every):
            reading = self._read(self.base_url)
            if reading is None:
                continue
            with self._lock:
                self._last = reading
                self._running.append(reading.running)
            if self._on_reading is not None and self._first is not None:
                self._on_reading(self._current(reading))

    def _current(self, last: LoadReading) -> Utilization:
        assert self._first is not None
        with self._lock:
            samples = list(self._running)
        return utilization(self._first, last, running_samples=samples, in_flight=self.in_flight,
                           peak_tokens_per_s=self.peak)

    def result(self) -> Utilization | None:
        """The run's utilization; None when the server exposes no counters (not vLLM, or /metrics unreachable)."""
        if self._first is None or self._last is None:
            return None
        return self._current(self._last)
