"""A speed point's benchmark invocations as data: what each sends (`bench_request`), where its results go,
its warm-ups and measured repeats (`point_steps`); the runner executes them and --dry-run prints them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from hfrelease.evaluation.plan import model_files
from hfrelease.speed import bench
from hfrelease.speed.plan import PointJob, SpeedPlan, SpeedServerJob


def bench_request(plan: SpeedPlan, job: SpeedServerJob, point: PointJob, *, base_url: str,
                  run_dir: Path = Path("<run dir>")) -> bench.BenchRequest:
    """What a point's benchmark sends: the workload's prompts, or a context sweep's (`sweep_prompts`)."""
    workload = point.workload
    prompts = sweep_prompts(job, point, run_dir) if point.input_len else plan.manifest.resolve(workload.prompts)
    return bench.BenchRequest(
        base_url=base_url, model=job.artifact.repo, tokenizer=model_files(job.artifact, job.model_dir).local_dir,
        prompts=prompts, num_prompts=point.num_prompts,
        output_len=workload.output_len, concurrency=point.concurrency, thinking=workload.thinking,
        ignore_eos=workload.ignore_eos, temperature=workload.temperature, top_p=workload.top_p,
    )


def point_path(job: SpeedServerJob, point: PointJob) -> Path:
    """Where a point's benchmark results go, relative to the run directory."""
    sweep = f"-in{point.input_len}" if point.input_len else ""
    return Path("bench") / f"{job.artifact.id}.{job.spec_id}" / f"{point.workload.id}-c{point.concurrency}{sweep}"


def sweep_prompts(job: SpeedServerJob, point: PointJob, run_dir: Path) -> Path:
    """Where a context sweep point's prompts are written before its benchmark runs (`hfrelease.speed.context`)."""
    return run_dir / point_path(job, point) / "prompts.jsonl"


def warmup_requests(request: bench.BenchRequest, warmups: int) -> list[tuple[bench.BenchRequest, str]]:
    """The warm-up invocations of a point and the result file each saves; none of them is counted.

    First `warmups` full-length requests: the first requests after a start are slow (lazy allocations,
    kernel selection; CUDA graph capture on a GPU). Then every prompt of the point once with a one-token
    budget: the server's prefix cache then holds all of them, so each repeat sees the same cache state.
    Without it the first repeat alone prefills cold prompts and its TTFT and tok/s differ from the
    others' for a reason that has nothing to do with the configuration.
    """
    steps: list[tuple[bench.BenchRequest, str]] = []
    if warmups:
        steps.append((replace(request, num_prompts=warmups), "warmup.json"))
    steps.append((replace(request, output_len=1), "prime.json"))
    return steps


@dataclass(frozen=True, kw_only=True)
class BenchStep:
    """One `vllm bench serve` invocation of a point: a warm-up (not counted) or a measured repeat."""

    argv: tuple[str, ...]
    result: Path  # the JSON it saves
    requests: int
    repeat: int | None  # index of the measured repeat; None for a warm-up


def point_steps(
    plan: SpeedPlan, job: SpeedServerJob, point: PointJob, *, base_url: str, run_dir: Path, vllm: str = "vllm",
) -> list[BenchStep]:
    """Every benchmark invocation of a point, in order: what the runner executes and --dry-run prints."""
    request = bench_request(plan, job, point, base_url=base_url, run_dir=run_dir)
    point_dir = run_dir / point_path(job, point)
    steps = [
        BenchStep(argv=tuple(bench.bench_argv(warm, vllm=vllm, result_dir=point_dir, result_filename=name)),
                  result=point_dir / name, requests=warm.num_prompts, repeat=None)
        for warm, name in warmup_requests(request, point.workload.warmups)
    ]
    steps += [
        BenchStep(argv=tuple(bench.bench_argv(request, vllm=vllm, result_dir=point_dir, result_filename=f"r{i}.json")),
                  result=point_dir / f"r{i}.json", requests=request.num_prompts, repeat=i)
        for i in range(point.workload.repeats)
    ]
    return steps
