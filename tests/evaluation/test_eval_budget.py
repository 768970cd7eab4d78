"""The in-flight budget of an artifact's gates (the knee of its sweep) and the utilization a run reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.evaluation.budget import Sweep, SweepPoint, choose_in_flight
from hfrelease.evaluation.utilization import LoadReading, LoadWatch, parse_reading, utilization
from hfrelease.manifest import Gate
from hfrelease.manifest.model import EvalSchedule

pytestmark = pytest.mark.unit


def _sweep(*pairs: tuple[int, float]) -> Sweep:
    return Sweep(workload_id="load", points=tuple(SweepPoint(concurrency=c, throughput=t, record=f"k{c}")
                                                  for c, t in pairs))


# The demo's FP8 quant on the 2-core CPU: 96 -> 183 -> 327 -> 504 tok/s at concurrency 1/2/4/8.
DEMO = _sweep((1, 96.0), (2, 183.0), (4, 327.0), (8, 504.0))


def test_knee_is_the_lowest_concurrency_near_the_peak() -> None:
    """The knee is the lowest level reaching 90 % of the peak: the last level while throughput still climbs,
    an earlier one once the curve flattens."""
    assert DEMO.knee().concurrency == 8
    flat = _sweep((1, 100.0), (4, 380.0), (8, 460.0), (16, 480.0), (32, 470.0))
    assert flat.peak.concurrency == 16
    assert flat.knee().concurrency == 8  # 460 >= 0.9 * 480


def test_throughput_between_and_beyond_measured_levels() -> None:
    """Measured levels read as measured; between two, linear; below the lowest, in proportion; above the highest,
    never more than the highest."""
    assert DEMO.throughput_at(4) == 327.0
    assert DEMO.throughput_at(6) == pytest.approx((327.0 + 504.0) / 2)
    assert DEMO.throughput_at(16) == 504.0
    low = _sweep((2, 200.0), (4, 300.0))
    assert low.throughput_at(1) == pytest.approx(100.0)


def _gate(gate_id: str, num_concurrent: int) -> Gate:
    return Gate(id=gate_id, task="t", mode="non-thinking", max_tokens=8, metric="acc,none", margin=0.05,
                num_concurrent=num_concurrent)


def test_budget_sources_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's knee when one is recorded, else the manifest's [eval] in_flight, else the gates' largest
    num_concurrent; each says where it came from."""
    from types import SimpleNamespace

    gates = [_gate("a", 4), _gate("b", 8)]
    manifest = SimpleNamespace(eval=EvalSchedule(in_flight=12))
    chosen = choose_in_flight(manifest, gates, DEMO)  # type: ignore[arg-type]
    assert (chosen.value, chosen.source) == (8, "sweep")
    assert "knee" in chosen.reason and "c8 504" in chosen.reason
    assert chosen.as_dict()["sweep"] == {"workload": "load", "points": {"1": 96.0, "2": 183.0, "4": 327.0,
                                                                        "8": 504.0}}
    chosen = choose_in_flight(manifest, gates, None)  # type: ignore[arg-type]
    assert (chosen.value, chosen.source) == (12, "manifest")
    chosen = choose_in_flight(SimpleNamespace(eval=EvalSchedule()), gates, None)  # type: ignore[arg-type]
    assert (chosen.value, chosen.source) == (8, "gates")


METRICS = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
vllm:generation_tokens_total{engine="0",model_name="m"} 1500.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 9000.0
vllm:request_inference_time_seconds_sum{engine="0",model_name="m"} 40.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
"""


def test_reading_sums_vllm_counters() -> None:
    """A /metrics page gives generated and prompt tokens, inference seconds and the running batch; a page
    without vLLM's counters gives no reading."""
    reading = parse_reading(METRICS, at=5.0)
    assert reading == LoadReading(at=5.0, generated=1500.0, prompt=9000.0, inference_seconds=40.0, running=3.0)
    assert parse_reading("process_cpu_seconds_total 3.0\n", at=0.0) is None


def test_utilization_against_the_sweep() -> None:
    """Generated tokens per second over the run divided by the sweep's throughput at the budget; the busy
    share from the running gauge; the mean batch from inference seconds per second."""
    first = LoadReading(at=0.0, generated=0.0, prompt=0.0, inference_seconds=0.0, running=0.0)
    last = LoadReading(at=10.0, generated=4536.0, prompt=100.0, inference_seconds=60.0, running=0.0)
    use = utilization(first, last, running_samples=[0, 6, 8, 8], in_flight=8, peak_tokens_per_s=504.0)
    assert use.tokens_per_s == pytest.approx(453.6)
    assert use.ratio == pytest.approx(0.9)
    assert use.busy_share == 0.75
    assert use.mean_batch == pytest.approx(6.0)
    assert "90% of the sweep's 504 at 8 in flight" in use.summary()
    assert use.as_dict()["utilization"] == 0.9
    alone = utilization(first, last, running_samples=[], in_flight=8, peak_tokens_per_s=None)
    assert alone.ratio is None and alone.busy_share is None and "no sweep" in alone.summary()


def test_load_watch_reads_while_the_block_runs() -> None:
    """The watch reads at the start, while the block runs (telling the live view) and at the end."""
    import itertools
    import time

    clock = itertools.count()
    seen: list[float] = []

    def read(url: str) -> LoadReading:
        t = float(next(clock))
        return LoadReading(at=t, generated=100.0 * t, prompt=0.0, inference_seconds=2.0 * t, running=1.0)

    with LoadWatch("http://x", in_flight=4, peak_tokens_per_s=200.0, read=read, every=0.01,
                   on_reading=lambda u: seen.append(u.tokens_per_s)) as watch:
        time.sleep(0.1)
    result = watch.result()
    assert result is not None and seen
    assert result.tokens_per_s == pytest.approx(100.0) and result.ratio == pytest.approx(0.5)
    assert result.mean_batch == pytest.approx(2.0) and result.busy_share == 1.0
    with LoadWatch("http://x", in_flight=4, peak_tokens_per_s=None, read=lambda url: None) as silent:
        pass
    assert silent.result() is None


def test_own_tasks_index_is_built_once_and_merged_as_lm_eval_does(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval's own tasks' index is built once and reused; merged with an include path it equals lm-eval's own
    index of both (an included task overrides a built-in one of the same name)."""
    import lm_eval.tasks.manager
    from lm_eval.tasks._index import TaskIndex

    from hfrelease.evaluation import task_index

    own, include = tmp_path / "own", tmp_path / "include"
    for root, names in ((own, ["a", "b"]), (include, ["b", "c"])):
        root.mkdir()
        for name in names:
            (root / f"{name}.yaml").write_text(f"task: {name}\ndataset_path: json\noutput_type: generate_until\n")
    monkeypatch.setattr(lm_eval.tasks.manager, "TaskIndex", TaskIndex)
    monkeypatch.setattr(task_index, "_own_root", lambda: own)
    built: list[Path] = []
    real_build = TaskIndex.build

    def counted(paths: Any, **kwargs: Any) -> Any:
        built.extend(Path(p) for p in paths)
        return real_build(paths, **kwargs)

    task_index._root_index.cache_clear()
    monkeypatch.setattr(TaskIndex, "build", staticmethod(counted))
    task_index.install()
    kept = lm_eval.tasks.manager.TaskIndex
    first = kept.build([own, include])
    again = kept.build([own, include])
    expected = real_build([own, include])
    assert {k: e.yaml_path for k, e in first.items()} == {k: e.yaml_path for k, e in expected.items()}
    assert first["b"].yaml_path == include / "b.yaml"
    assert again.keys() == first.keys() and built.count(own) == 1
    task_index._root_index.cache_clear()
