"""The `vllm bench serve` command hfrelease builds and the saved JSON it reads; medians and spreads of repeats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import MeasurementError
from hfrelease.speed.bench import BenchRequest, bench_argv, load_result, parse_result
from hfrelease.speed.metrics import SpecCounters
from hfrelease.speed.summary import Repeat, median_and_spread, summarise

pytestmark = pytest.mark.unit

# A result saved by `vllm bench serve --save-result` on the demo reference with ngram speculation (the
# per-request lists trimmed).
RESULT: dict[str, Any] = json.loads(
    '{"date": "20261129-201603", "endpoint_type": "openai-chat", "backend": "openai-chat", "label": null,'
    ' "model_id": "hfrelease-demo/tiny-reference", "tokenizer_id": "/work/main/build/demo/reference",'
    ' "num_prompts": 4, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 1,'
    ' "duration": 0.21272443500038207, "completed": 4, "failed": 0, "total_input_tokens": 68,'
    ' "total_output_tokens": 37, "request_throughput": 18.803669639516567, "request_goodput": null,'
    ' "output_throughput": 173.93394416552826, "total_token_throughput": 493.5963280373099,'
    ' "max_output_tokens_per_s": 39.0, "max_concurrent_requests": 4, "rtfx": 0.0,'
    ' "spec_decode_acceptance_rate": 16.666666666666664, "spec_decode_acceptance_length": 1.6666666666666665,'
    ' "spec_decode_num_drafts": 3, "spec_decode_draft_tokens": 12, "spec_decode_accepted_tokens": 2,'
    ' "spec_decode_per_position_acceptance_rates": [0.6666666666666666, 0.0, 0.0, 0.0],'
    ' "mean_ttft_ms": 28.6762037499102, "median_ttft_ms": 24.957150999853184, "std_ttft_ms": 16.638180341761085,'
    ' "p50_ttft_ms": 24.957150999853184, "p90_ttft_ms": 47.61979720015006, "p99_ttft_ms": 53.16027172010763,'
    ' "mean_tpot_ms": 2.7591071661818423, "median_tpot_ms": 3.1384110625241295, "std_tpot_ms": 1.9052001924809525,'
    ' "p50_tpot_ms": 3.1384110625241295, "p90_tpot_ms": 4.615716577771106, "p99_tpot_ms": 4.7376823577704075,'
    ' "mean_itl_ms": 2.7809657142954944, "median_itl_ms": 0.007501000254706014, "std_itl_ms": 6.39025378139484,'
    ' "p50_itl_ms": 0.007501000254706014, "p90_itl_ms": 6.173279600079695, "p99_itl_ms": 28.427233340025783,'
    ' "mean_e2el_ms": 53.00965374999578, "median_e2el_ms": 51.77235049995943, "std_e2el_ms": 4.127505423060689,'
    ' "p50_e2el_ms": 51.77235049995943, "p90_e2el_ms": 57.7442095996048, "p99_e2el_ms": 59.25224545940182}'
)

REQUEST = BenchRequest(base_url="http://127.0.0.1:8000", model="hfrelease-demo/tiny-reference",
                       tokenizer="/models/reference", prompts=Path("/data/chat.jsonl"), num_prompts=48, output_len=32,
                       concurrency=4, thinking=False)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_argv_has_the_settings_that_make_numbers_true() -> None:
    """Chat backend, server-side template only, greedy, no in-run warm-ups, median/p90/p99 of every latency."""
    argv = bench_argv(REQUEST, vllm="/venv/bin/vllm", result_dir=Path("/run/x"), result_filename="r0.json")
    assert argv[:3] == ["/venv/bin/vllm", "bench", "serve"]
    assert _flag(argv, "--backend") == "openai-chat"
    assert "--skip-chat-template" in argv
    assert _flag(argv, "--temperature") == "0"
    assert "--ignore-eos" not in argv  # requests stop where the model does: acceptance of real text
    assert _flag(argv, "--num-warmups") == "0"
    assert _flag(argv, "--max-concurrency") == "4"
    assert _flag(argv, "--percentile-metrics") == "ttft,tpot,itl,e2el"
    assert _flag(argv, "--metric-percentiles") == "50,90,99"
    assert _flag(argv, "--custom-output-len") == "32"
    assert _flag(argv, "--num-prompts") == "48"
    assert _flag(argv, "--dataset-name") == "custom"
    assert "--save-result" in argv and _flag(argv, "--result-filename") == "r0.json"
    assert json.loads(_flag(argv, "--extra-body")) == {"chat_template_kwargs": {"enable_thinking": False}}


def test_fixed_length_workload_ignores_eos() -> None:
    """`ignore_eos = true` asks vLLM's benchmark for exactly output_len tokens per request."""
    argv = bench_argv(BenchRequest(**{**REQUEST.__dict__, "ignore_eos": True}))
    assert "--ignore-eos" in argv and _flag(argv, "--custom-output-len") == "32"


def test_thinking_workload_keeps_the_template_default() -> None:
    """A thinking workload sends no chat_template_kwargs (the template thinks by default); no result dir, no save."""
    argv = bench_argv(BenchRequest(**{**REQUEST.__dict__, "thinking": True}))
    assert "--extra-body" not in argv
    assert "--save-result" not in argv


def test_parse_result_reads_throughput_and_percentiles() -> None:
    """Median/p90/p99 of TTFT, TPOT, ITL and E2EL under the ledger's names; failures and spec fields kept."""
    result = parse_result(RESULT)
    assert result.output_throughput == pytest.approx(173.934, abs=1e-3)
    assert result.completed == 4 and result.failed == 0 and result.total_output_tokens == 37
    assert result.latencies_ms["ttft_median_ms"] == pytest.approx(24.957, abs=1e-3)
    assert result.latencies_ms["itl_p90_ms"] == pytest.approx(6.173, abs=1e-3)
    assert result.latencies_ms["e2el_p99_ms"] == pytest.approx(59.252, abs=1e-3)
    assert set(result.metrics()) >= {"output_throughput", "ttft_median_ms", "ttft_p90_ms", "ttft_p99_ms",
                                     "itl_median_ms", "itl_p90_ms", "itl_p99_ms", "tpot_median_ms", "e2el_median_ms"}
    assert result.spec["spec_decode_num_drafts"] == 3


def test_parse_result_without_percentiles_is_a_measurement_error() -> None:
    """A result run without --metric-percentiles 50,90,99 is refused with the flags to use."""
    broken = {k: v for k, v in RESULT.items() if k != "p90_itl_ms"}
    with pytest.raises(MeasurementError, match="--metric-percentiles"):
        parse_result(broken)


def test_load_result_keeps_the_bytes(tmp_path: Path) -> None:
    """The file's bytes come back verbatim, to be kept beside the record."""
    path = tmp_path / "r0.json"
    path.write_text(json.dumps(RESULT))
    result, content = load_result(path)
    assert content == path.read_bytes() and result.duration_s == pytest.approx(0.2127, abs=1e-4)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(MeasurementError):
        load_result(tmp_path / "bad.json")


def test_median_and_spread() -> None:
    """The median of an odd and an even count, and [min, max]."""
    assert median_and_spread([3.0, 1.0, 2.0]) == (2.0, [1.0, 3.0])
    assert median_and_spread([4.0, 1.0]) == (2.5, [1.0, 4.0])
    with pytest.raises(ValueError):
        median_and_spread([])


def test_summarise_repeats() -> None:
    """Throughput is the median over repeats with its spread; acceptance is pooled from the summed counters."""
    repeats = []
    for throughput, failed, (drafts, accepted) in ((100.0, 0, (10, 15)), (90.0, 1, (20, 10)), (110.0, 0, (10, 5))):
        data = {**RESULT, "output_throughput": throughput, "failed": failed}
        spec = SpecCounters(drafts=drafts, draft_tokens=3 * drafts, accepted=accepted,
                            accepted_per_pos={0: accepted}, present=True)
        repeats.append(Repeat(result=parse_result(data), spec=spec))
    summary = summarise(repeats)
    assert summary.metrics["output_throughput"] == 100.0
    assert summary.spread["output_throughput"] == [90.0, 110.0]
    assert summary.failed == 1 and summary.completed == 12
    assert summary.metrics["spec_drafts"] == 40 and summary.metrics["spec_accepted_tokens"] == 30
    assert summary.metrics["spec_acceptance_rate"] == pytest.approx(30 / 120, abs=1e-6)
    assert summary.metrics["spec_mean_acceptance_length"] == pytest.approx(1 + 30 / 40, abs=1e-6)
    assert summary.spread["spec_acceptance_rate"] == pytest.approx([10 / 60, 0.5], abs=1e-6)


def test_summarise_without_speculation_has_no_spec_metrics() -> None:
    """Repeats on a server without speculation record no spec_* metrics."""
    summary = summarise([Repeat(result=parse_result(RESULT), spec=SpecCounters())])
    assert not any(name.startswith("spec_") for name in summary.metrics)


def test_warmups_prime_every_prompt() -> None:
    """Warm-up: the manifest's full-length requests, then every prompt once with a one-token budget."""
    from hfrelease.speed.steps import warmup_requests

    steps = warmup_requests(REQUEST, 2)
    assert [(r.num_prompts, r.output_len, name) for r, name in steps] == [(2, 32, "warmup.json"),
                                                                          (48, 1, "prime.json")]
    assert [name for _, name in warmup_requests(REQUEST, 0)] == ["prime.json"]
