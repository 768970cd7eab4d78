"""Speed the way the seeds measure it: sampling settings recorded with the numbers, a context-length sweep,
acceptance at every point of a load sweep."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import MeasurementError
from hfrelease.files.hashing import ContentHash, FileHash
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.speed import bench
from hfrelease.speed.context import context_prompts
from hfrelease.speed.plan import SpeedPlan, plan_speed
from hfrelease.speed.result import SpeedRow
from hfrelease.speed.steps import point_steps
from hfrelease.speed.verdict import best_configs, draft_checks, with_speedups

pytestmark = pytest.mark.unit


def _hasher(directory: Path, **_: Any) -> ContentHash:
    import hashlib

    sha = hashlib.sha256(directory.name.encode()).hexdigest()
    return ContentHash(sha256=sha, files=(FileHash(path="model.safetensors", size=1, sha256=sha),), bytes_read=0)


def _with_workload(base: Manifest, **changes: Any) -> Manifest:
    workload = base.workload[0].model_copy(update=changes)
    manifest = base.model_copy(update={"workload": [workload]})
    manifest._root = base.root
    return manifest


def _plan(manifest: Manifest) -> SpeedPlan:
    return plan_speed(manifest, ledger=Ledger(manifest.root / "results"), hash_cache=None, hasher=_hasher)


def _keys(manifest: Manifest) -> list[str]:
    return [p.input_key for job in _plan(manifest).servers for p in job.points if not p.input_len]


def test_sampling_settings_reach_the_benchmark_and_the_key(fixture_family: Path) -> None:
    """Greedy stays the default and keeps the keys; temperature / top-p are passed to vllm bench serve and
    re-key the points."""
    base = load_manifest(fixture_family)
    keys = _keys(base)
    assert _keys(_with_workload(base, temperature=0.0)) == keys
    assert _keys(_with_workload(base, temperature=0.6))[0] != keys[0]
    assert _keys(_with_workload(base, temperature=0.6, top_p=0.95))[0] not in (keys[0], _keys(
        _with_workload(base, temperature=0.6))[0])
    request = bench.BenchRequest(base_url="http://h", model="m", tokenizer="t", prompts=Path("p.jsonl"),
                                 num_prompts=2, output_len=8, concurrency=1, thinking=False)
    greedy = bench.bench_argv(request)
    assert greedy[greedy.index("--temperature") + 1] == "0" and "--top-p" not in greedy
    sampled = bench.bench_argv(request.__class__(**{**request.__dict__, "temperature": 0.6, "top_p": 0.95}))
    assert sampled[sampled.index("--temperature") + 1] == "0.6" and sampled[sampled.index("--top-p") + 1] == "0.95"


def test_context_sweep_plans_one_batch1_point_per_length(fixture_family: Path) -> None:
    """`input_lens` adds a concurrency-1 point per length and config, each keyed apart; the workload's own
    points keep their keys; the dry run's command reads that length's prompts file."""
    base = load_manifest(fixture_family)
    keys = _keys(base)
    manifest = _with_workload(base, input_lens=[64, 256])
    plan = _plan(manifest)
    assert _keys(manifest) == keys
    for job in plan.servers:
        sweep = [p for p in job.points if p.input_len]
        assert [(p.input_len, p.concurrency) for p in sweep] == [(64, 1), (256, 1)]
        assert len({p.input_key for p in job.points}) == len(job.points)
        assert sweep[0].label == "chat c1 in64"
        steps = point_steps(plan, job, sweep[1], base_url="http://h", run_dir=Path("/run"))
        path = steps[-1].argv[steps[-1].argv.index("--dataset-path") + 1]
        assert path == f"/run/bench/{job.artifact.id}.{job.spec_id}/chat-c1-in256/prompts.jsonl"


class _Words:
    """A tokenizer of whitespace-separated words, one id per word."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def decode(self, ids: Sequence[int]) -> str:
        words = {i: w for w, i in self.vocab.items()}
        return " ".join(words[i] for i in ids)


def test_context_prompts_are_the_workloads_text_cut_to_length(tmp_path: Path) -> None:
    """Each sweep prompt has exactly input_len tokens of the workload's own text, starting from a different
    prompt; a prompt set without text is refused."""
    source = tmp_path / "p.jsonl"
    source.write_text('{"prompt": "a b c"}\n{"prompt": "d e"}\n\n{"prompt": "f"}\n')
    tokenizer = _Words()
    lines = context_prompts(source, tokenizer=tokenizer, input_len=5, count=4).decode().splitlines()
    prompts = [json.loads(line)["prompt"] for line in lines]
    assert prompts == ["a b c d e", "d e f a b", "f a b c d", "a b c d e"]
    assert all(len(tokenizer.encode(p)) == 5 for p in prompts)
    (tmp_path / "empty.jsonl").write_text('{"prompt": ""}\n')
    with pytest.raises(MeasurementError, match="no tokens"):
        context_prompts(tmp_path / "empty.jsonl", tokenizer=tokenizer, input_len=5, count=1)


def _row(spec: str, tps: float, *, input_len: int | None = None, draft: str | None = None,
         acceptance: float = 0.7) -> SpeedRow:
    return SpeedRow(artifact_id="ref", workload_id="chat", speculative=spec, concurrency=1, draft_id=draft,
                    origin="recorded", status="ok",
                    metrics={"output_throughput": tps, "spec_acceptance_rate": acceptance}, input_len=input_len)


def test_sweep_points_are_not_the_workloads(fixture_family: Path) -> None:
    """Speedups pair a sweep point with no speculation at the same length; the best config and the draft
    gates read the workload's own batch-1 points only (a fast sweep point never wins the workload)."""
    manifest = load_manifest(fixture_family)
    workload_rows = [_row("none", 10.0), _row("draft", 12.0, draft="draft")]
    sweep_rows = [_row("none", 5.0, input_len=256), _row("draft", 50.0, input_len=256, draft="draft", acceptance=0.01)]
    rows = with_speedups(workload_rows + sweep_rows)
    assert [r.speedup for r in rows] == [1.0, pytest.approx(1.2), 1.0, pytest.approx(10.0)]
    best = best_configs(manifest, rows)
    assert [(b.speculative, b.throughput) for b in best] == [("draft", 12.0)]
    assert draft_checks(manifest, rows) == draft_checks(manifest, with_speedups(workload_rows))
