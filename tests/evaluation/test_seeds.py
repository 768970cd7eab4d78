"""Seeds for sampled gates: one run per seed, each recorded under its own key, judged with items as the unit."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tomli_w
from safetensors.numpy import save_file

from hfrelease.cli import main
from hfrelease.errors import ConfigError
from hfrelease.evaluation.judging import judge
from hfrelease.evaluation.plan import describe_gate, gate_input_key, model_files, plan_eval
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Gate, Manifest, load_manifest
from hfrelease.verdicts.comparison import paired_comparison
from hfrelease.verdicts.seeds import seed_runs
from hfrelease.verdicts.verdict import judge_samples, judge_seeds

pytestmark = pytest.mark.unit

SEEDS = [11, 22, 33]


def _edit(family: Path, **arith: Any) -> Path:
    """The fixture family with the `arith` gate's keys replaced (None deletes a key)."""
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    gate = next(g for g in data["gate"] if g["id"] == "arith")
    for key, value in arith.items():
        if value is None:
            gate.pop(key, None)
        else:
            gate[key] = value
    path.write_text(tomli_w.dumps(data))
    return family


@pytest.fixture
def seeded(fixture_family: Path) -> Manifest:
    """The fixture family, weights written, its `arith` gate sampled at T=0.6 under three seeds."""
    for name, seed in (("ref", 0), ("fp8", 1), ("draft", 2)):
        weights = np.random.default_rng(seed).standard_normal((4, 4)).astype("float32")
        save_file({"w": weights}, str(fixture_family / "checkpoints" / name / "model.safetensors"))
    return load_manifest(_edit(fixture_family, temperature=0.6, top_p=0.95, seeds=SEEDS))


def _problems(family: Path) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load_manifest(family)
    return {p.location: p.message for p in info.value.problems}


@pytest.mark.parametrize(("arith", "location", "words"), [
    ({"temperature": 0.6, "seeds": []}, "gate[0].seeds", "no seed"),
    ({"temperature": 0.6, "seeds": [1, 2, 1]}, "gate[0].seeds", "1 listed more than once"),
    ({"temperature": 0.6, "seeds": [1, 2.5]}, "gate[0].seeds[1]", "integer"),
    ({"temperature": 0.6, "seeds": [1, "2"]}, "gate[0].seeds[1]", "integer"),
    ({"temperature": 0.6, "seeds": [True, 2]}, "gate[0].seeds[0]", "integer"),
    ({"temperature": 0.6, "seeds": [-1]}, "gate[0].seeds[0]", "greater than or equal to 0"),
    ({"temperature": 0.6, "seeds": [2**32]}, "gate[0].seeds[0]", "less than or equal to 4294967295"),
    ({"temperature": 0.6, "seeds": 7}, "gate[0].seeds", "array"),
    ({"temperature": 0.6, "seeds": list(range(33))}, "gate[0].seeds", "at most 32"),
    ({"temperature": 0.6, "seeds": [1, 2], "seed": 5}, "gate[0].seed", "not both"),
    ({"seeds": [1, 2]}, "gate[0].seeds", "greedy (temperature 0)"),
    ({"temperature": 0.0, "seeds": [1, 2]}, "gate[0].seeds", "greedy (temperature 0)"),
])
def test_check_refuses_bad_seeds(fixture_family: Path, arith: dict[str, Any], location: str, words: str) -> None:
    """Empty, repeated, non-integer, out-of-range seeds, seeds beside seed, on a greedy gate: refused at its key."""
    problems = _problems(_edit(fixture_family, **arith))
    assert location in problems, problems
    assert words in problems[location], problems[location]


def test_check_refuses_seeds_on_a_fidelity_gate(fixture_family: Path) -> None:
    """A fidelity gate is greedy by construction: seeds on it are refused at the field."""
    path = fixture_family / "release.toml"
    data = tomllib.loads(path.read_text())
    (fixture_family / "prompts" / "fid.jsonl").write_text('{"id": "a", "prompt": "hello"}\n')
    data["gate"].append({"id": "fid", "fidelity": "prompts/fid.jsonl", "max_tokens": 8, "max_kl": 0.1,
                         "seeds": [1, 2]})
    path.write_text(tomli_w.dumps(data))
    problems = _problems(fixture_family)
    assert "takes no seeds" in problems[f"gate[{len(data['gate']) - 1}].seeds"]


def test_check_accepts_seeds_on_sampled_and_custom_gates(fixture_family: Path) -> None:
    """Seeds on a sampled lm-eval gate and on a custom gate (which samples as it likes) load."""
    _edit(fixture_family, temperature=0.6, seeds=[3, 1, 2])
    path = fixture_family / "release.toml"
    data = tomllib.loads(path.read_text())
    next(g for g in data["gate"] if g["id"] == "json")["seeds"] = [0, 4294967295]
    path.write_text(tomli_w.dumps(data))
    manifest = load_manifest(fixture_family)
    assert [g.seeds for g in manifest.gate] == [[3, 1, 2], [0, 4294967295]]


def test_each_seed_is_a_job_keyed_as_a_single_seed_gate(seeded: Manifest, tmp_path: Path) -> None:
    """One job per seed per artifact; each key is exactly that of the same gate run once with `seed = s`."""
    plan = plan_eval(seeded, ledger=Ledger(tmp_path / "results"), hash_cache=None, gates=["arith"])
    ref = plan.servers[0]
    assert [(g.gate.id, g.gate.seed, g.seeded) for g in ref.gates] == [("arith", s, True) for s in SEEDS]
    assert [g.label for g in ref.gates] == [f"arith (seed {s})" for s in SEEDS]
    assert len({g.input_key for g in ref.gates}) == 3
    gate = seeded.gate[0]
    assert ref.content is not None
    for job, seed in zip(ref.gates, SEEDS, strict=True):
        single = Gate.model_validate({**gate.model_dump(exclude={"seeds"}), "seed": seed})
        assert job.input_key == gate_input_key(seeded, single, content_sha256=ref.content.sha256, public=ref.public)
    # The gate without seeds keeps its key (no `seeds: null` in it): records made before seeds existed stay current.
    plain = Gate.model_validate(gate.model_dump(exclude={"seeds"}))
    assert "seeds" not in json.dumps(plain.model_dump(mode="json", exclude_none=True))
    assert seed_runs(plain) == (plain,)


def _record(job_key: str, artifact: str, artifact_hash: str, seed: int, scores: list[float], *,
            status: str = "ok", started_at: str = "2026-11-29T12:00:00Z") -> LedgerRecord:
    samples = tuple(Sample(doc_id=str(i), score=s, truncated=False, empty=False) for i, s in enumerate(scores))
    return LedgerRecord(
        kind="gate", family="fixture", artifact_id=artifact, artifact_hash=artifact_hash, artifact_files=(),
        subject_id="arith", harness="lm-eval", task="fixture_task", task_hash=None, mode="non-thinking",
        n=len(scores), seed=seed, generation={}, metrics={"exact_match,none": Metric(value=float(np.mean(scores)))},
        samples=samples, truncated=0, empty=0, serve=ServeRecord(argv=("vllm",), env={}, display="vllm"),
        versions={}, hardware={}, started_at=started_at, duration_s=1.0, input_key=job_key,
        extra={"value": float(np.mean(scores))}, status=status,  # type: ignore[arg-type]
        void_reason="cut off" if status == "void" else None,
    )


def _scores(seed: int, n: int = 40, accuracy: float = 0.7) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in (rng.random(n) < accuracy)]


def test_warm_rerun_reuses_each_seed(seeded: Manifest, tmp_path: Path) -> None:
    """Seeds already recorded are not re-run; only the missing seed is pending; a seed added later runs alone."""
    ledger = Ledger(tmp_path / "results")
    plan = plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"], artifacts=["ref"])
    ref = plan.servers[0]
    assert ref.content is not None
    for job in ref.gates[:2]:
        ledger.write(_record(job.input_key, "ref", ref.content.sha256, job.gate.seed, _scores(job.gate.seed)))
    again = plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"], artifacts=["ref"])
    assert [g.gate.seed for g in again.servers[0].pending] == [33]
    assert [g.recorded is not None for g in again.servers[0].gates] == [True, True, False]
    forced = plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"], artifacts=["ref"], force=True)
    assert len(forced.servers[0].pending) == 3


def test_judge_merges_seeds_into_one_row(seeded: Manifest, tmp_path: Path) -> None:
    """One row per gate over every seed: the mean of the runs, items as the unit; a missing seed: no row yet."""
    ledger = Ledger(tmp_path / "results")
    plan = plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"])
    for server in plan.servers:
        assert server.content is not None
        for job in server.gates[:2]:
            ledger.write(_record(job.input_key, server.artifact.id, server.content.sha256, job.gate.seed,
                                 _scores(job.gate.seed)))
    assert judge(plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"]), ledger=ledger, measured={},
                 hash_cache=None) == []
    for server in plan.servers:
        assert server.content is not None
        job = server.gates[2]
        ledger.write(_record(job.input_key, server.artifact.id, server.content.sha256, 33, _scores(33)))
    rows = judge(plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"]), ledger=ledger, measured={},
                 hash_cache=None)
    assert [(r.artifact_id, r.verdict, r.seeds, r.n) for r in rows] == [("ref", "reference", 3, 40),
                                                                         ("fp8", "pass", 3, 40)]
    assert rows[0].value == pytest.approx(np.mean([np.mean(_scores(s)) for s in SEEDS]))
    assert rows[1].comparison is not None and rows[1].comparison.n_paired == 40


def test_a_void_seed_voids_the_gate(seeded: Manifest, tmp_path: Path) -> None:
    """One seed's void run (measured in this run: a void record is never reused) voids the merged row, naming
    that seed."""
    ledger = Ledger(tmp_path / "results")
    plan = plan_eval(seeded, ledger=ledger, hash_cache=None, gates=["arith"])
    measured = {}
    for server in plan.servers:
        assert server.content is not None
        for job in server.gates:
            status = "void" if (server.artifact.id, job.gate.seed) == ("fp8", 22) else "ok"
            record = _record(job.input_key, server.artifact.id, server.content.sha256, job.gate.seed,
                             _scores(job.gate.seed), status=status)
            ledger.write(record)
            measured[(server.artifact.id, "arith", job.gate.seed)] = record
    rows = judge(plan, ledger=ledger, measured=measured, hash_cache=None)
    assert rows[1].verdict == "void" and rows[1].reason == "seed 22: cut off"


def _samples(scores: list[float]) -> tuple[Sample, ...]:
    return tuple(Sample(doc_id=str(i), score=s, truncated=False, empty=False) for i, s in enumerate(scores))


def test_items_are_resampled_with_their_seeds(seeded: Manifest) -> None:
    """Three seeds answering each item alike give the one-seed interval, not one sqrt(3) narrower; the
    merged interval is the bootstrap of the items' seed-means."""
    gate = seeded.gate[0]
    artifact, reference = _scores(1, 60, 0.6), _scores(2, 60, 0.8)
    once = judge_samples(gate, _samples(artifact), _samples(reference)).comparison
    thrice = judge_seeds(gate, {s: _samples(artifact) for s in SEEDS}, {s: _samples(reference) for s in SEEDS})
    assert (thrice.comparison.ci_low, thrice.comparison.ci_high, thrice.comparison.n_paired) == (
        once.ci_low, once.ci_high, 60)
    # Different answers per seed: the interval is the paired bootstrap of each item's mean over the seeds.
    runs_a = {s: _samples(_scores(s, 60, 0.6)) for s in SEEDS}
    runs_r = {s: _samples(_scores(s + 100, 60, 0.8)) for s in SEEDS}
    merged = judge_seeds(gate, runs_a, runs_r).comparison
    mean_a = {str(i): float(np.mean([_scores(s, 60, 0.6)[i] for s in SEEDS])) for i in range(60)}
    mean_r = {str(i): float(np.mean([_scores(s + 100, 60, 0.8)[i] for s in SEEDS])) for i in range(60)}
    direct = paired_comparison(mean_a, mean_r, margin=gate.margin, seed=gate.seed, min_recovery=gate.min_recovery)
    assert (merged.delta, merged.ci_low, merged.ci_high) == (direct.delta, direct.ci_low, direct.ci_high)
    assert merged.n_paired == 60 and merged.p_value is None  # item means are not 0/1: no McNemar


def test_an_item_some_seed_lacks_is_left_out(seeded: Manifest) -> None:
    """Only items every seed scored are compared."""
    gate = seeded.gate[0]
    full = _samples([1.0] * 10)
    judged = judge_seeds(gate, {11: full, 22: full[:7]}, {11: full, 22: full})
    assert judged.comparison.n_paired == 7


def test_dry_run_prints_one_command_per_seed(seeded: Manifest, capsys: pytest.CaptureFixture[str]) -> None:
    """`eval --dry-run` lists each seed's run, its lm-eval command carrying that seed for the server and lm-eval."""
    plan = plan_eval(seeded, ledger=Ledger(seeded.root / "results"), hash_cache=None, gates=["arith"],
                     artifacts=["ref"])
    job = plan.servers[0]
    for gate_job, seed in zip(job.gates, SEEDS, strict=True):
        line = describe_gate(seeded, gate_job, base_url="http://h", model="m",
                             files=model_files(job.artifact, job.model_dir))
        assert f'"seed":{seed}' in line and f"--seed {seed}" in line, line
    with pytest.raises(SystemExit):
        main(["eval", "--dry-run", "--json", "--gate", "arith", str(seeded.root)])
    data = json.loads(capsys.readouterr().out)
    gates = [g["gate"] for g in data["servers"][0]["gates"]]
    assert gates == [f"arith (seed {s})" for s in SEEDS]


def test_each_request_carries_its_seed(seeded: Manifest) -> None:
    """The seed reaches every request (lm-eval's per-request `seed`, vLLM's sampling seed) and lm-eval's generators."""
    from hfrelease.evaluation.plan import gate_call

    for run, seed in zip(seed_runs(seeded.gate[0]), SEEDS, strict=True):
        files = model_files(seeded.artifact[0], seeded.root)
        call = gate_call(seeded, run, base_url="http://h", model="m", files=files)
        assert call.model_args["seed"] == seed
        assert {call.evaluate[k] for k in ("random_seed", "numpy_random_seed", "torch_random_seed",
                                           "fewshot_random_seed")} == {seed}
        assert call.evaluate["gen_kwargs"]["temperature"] == 0.6
