"""Under the concurrent schedule a custom gate holds as many slots of the budget as it sends requests at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hfrelease.evaluation.lm_eval_gate import GateRun
from hfrelease.evaluation.plan import GateJob
from hfrelease.evaluation.schedule import _start, gate_slots, holding
from hfrelease.manifest import Gate

pytestmark = pytest.mark.unit


class CountingSlots:
    """A bounded semaphore that remembers how many of its slots were held at most."""

    def __init__(self, size: int) -> None:
        self.inner = threading.BoundedSemaphore(size)
        self.lock = threading.Lock()
        self.held = self.most = 0

    def acquire(self) -> None:
        self.inner.acquire()
        with self.lock:
            self.held += 1
            self.most = max(self.most, self.held)

    def release(self) -> None:
        with self.lock:
            self.held -= 1
        self.inner.release()


def _custom(num_concurrent: int | None = None) -> Gate:
    extra = {"num_concurrent": num_concurrent} if num_concurrent is not None else {}
    return Gate.model_validate({"id": "json", "command": ["python", "gate.py"], "mode": "non-thinking",
                                "max_tokens": 8, "metric": "rate", "margin": 0.1, **extra})


def test_slots_a_gate_holds() -> None:
    """A custom gate holds its declared num_concurrent (1 unset), at most the whole budget; a fidelity gate one."""
    fidelity = Gate.model_validate({"id": "fid", "fidelity": "p.jsonl", "max_tokens": 8, "max_kl": 0.1})
    assert [gate_slots(_custom(), 16), gate_slots(_custom(4), 16), gate_slots(_custom(24), 16)] == [1, 4, 16]
    assert gate_slots(fidelity, 16) == 1


def test_custom_gate_holds_its_slots_while_it_runs(tmp_path: Path) -> None:
    """The custom gate's thread holds its 3 slots for the whole measurement and gives them back after it."""
    slots = CountingSlots(8)
    seen: list[int] = []

    def measure(gate_job: GateJob, cache: Any, on_progress: Any, *, redirect: bool = True) -> GateRun:
        seen.append(slots.held)
        return GateRun(value=1.0, stderr=0.0, metrics={}, samples=[], n=0, truncated=0, empty=0, requests=3,
                       task_hash=None)

    context = SimpleNamespace(job=SimpleNamespace(artifact=SimpleNamespace(id="ref")),
                              events=SimpleNamespace(gate_progress=lambda *a: None),
                              request_cache_of=lambda job: None, measure=measure)
    job = GateJob(artifact_id="ref", gate=_custom(3), input_key="k", recorded=None)
    item = _start(context, job, slots, 8)  # type: ignore[arg-type]
    assert item.thread is not None
    item.thread.join(5)
    assert seen == [3] and slots.held == 0
    assert item.outcome is not None and item.outcome[0] == "result"


def test_gates_gathering_most_of_the_budget_do_not_wait_for_each_other() -> None:
    """Three gates each needing 6 of 8 slots take turns (gathered one gate at a time), never holding more than 8:
    gathered in parallel, two could each hold 4 and wait for ever."""
    slots = CountingSlots(8)
    gathering = threading.Lock()

    def gate() -> None:
        with holding(slots, 6, gathering):
            time.sleep(0.02)

    threads = [threading.Thread(target=gate) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert not any(t.is_alive() for t in threads)
    assert slots.most <= 8 and slots.held == 0
