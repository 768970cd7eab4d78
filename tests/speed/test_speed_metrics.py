"""Speculative-decoding counters parsed from /metrics text, their deltas and the acceptance arithmetic."""

from __future__ import annotations

import pytest

from hfrelease.speed.metrics import SpecCounters, acceptance_metrics, parse_counters, relevant_lines

pytestmark = pytest.mark.unit

MODEL = "hfrelease-demo/tiny-reference"


def _page(drafts: float, tokens: float, accepted: float, per_pos: list[float], *, engine: str = "0",
          model: str = MODEL) -> str:
    """A /metrics page in vLLM's exposition format (HELP/TYPE lines, _created gauges, other metrics)."""
    labels = f'engine="{engine}",model_name="{model}"'
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} 0.0",
    ]
    for name, value in (("drafts", drafts), ("draft_tokens", tokens), ("accepted_tokens", accepted)):
        lines += [f"# HELP vllm:spec_decode_num_{name}_total Number of {name}.",
                  f"# TYPE vllm:spec_decode_num_{name}_total counter",
                  f"vllm:spec_decode_num_{name}_total{{{labels}}} {value}",
                  f"# TYPE vllm:spec_decode_num_{name}_created gauge",
                  f"vllm:spec_decode_num_{name}_created{{{labels}}} 1.7959833606010323e+09"]
    lines += ["# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
              "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {v}'
              for i, v in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


# Recorded on the demo reference with ngram k=4 (one repeat of `hfrelease eval --speed`), before and after.
BEFORE = _page(4.0, 16.0, 3.0, [3.0, 0.0, 0.0, 0.0])
AFTER = _page(7.0, 28.0, 5.0, [5.0, 0.0, 0.0, 0.0])


def test_parse_reads_the_four_counters() -> None:
    """Totals and per-position counts come out as integers; _created gauges and other metrics are ignored."""
    counters = parse_counters(AFTER, model_name=MODEL)
    assert counters == SpecCounters(drafts=7, draft_tokens=28, accepted=5, accepted_per_pos={0: 5, 1: 0, 2: 0, 3: 0},
                                    present=True)


def test_delta_matches_the_benchmarks_own_counts() -> None:
    """The delta of the recorded snapshots equals what vllm bench serve reported for the same run (3/12/2)."""
    delta = parse_counters(AFTER, model_name=MODEL) - parse_counters(BEFORE, model_name=MODEL)
    assert (delta.drafts, delta.draft_tokens, delta.accepted) == (3, 12, 2)
    metrics = acceptance_metrics(delta)
    assert metrics["spec_acceptance_rate"] == pytest.approx(2 / 12)
    assert metrics["spec_mean_acceptance_length"] == pytest.approx(1 + 2 / 3)
    assert metrics["spec_acceptance_pos_0"] == pytest.approx(2 / 3)  # the benchmark's per-position rate


def test_engines_are_summed() -> None:
    """A data-parallel server exposes one series per engine: a snapshot is their sum."""
    text = _page(10, 30, 20, [9, 7, 4], engine="0") + _page(5, 15, 6, [4, 2, 0], engine="1")
    counters = parse_counters(text, model_name=MODEL)
    assert (counters.drafts, counters.draft_tokens, counters.accepted) == (15, 45, 26)
    assert counters.accepted_per_pos == {0: 13, 1: 9, 2: 4}


def test_other_models_are_ignored() -> None:
    """Series of another served model name do not count; without a name filter everything counts."""
    text = _page(10, 30, 20, [9, 7, 4]) + _page(100, 300, 0, [0, 0, 0], model="someone/else")
    assert parse_counters(text, model_name=MODEL).drafts == 10
    assert parse_counters(text).drafts == 110


def test_no_speculation_means_no_counters() -> None:
    """A server without speculation has no spec_decode series: nothing present, no spec metrics."""
    text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 0.0\n"
    counters = parse_counters(text, model_name=MODEL)
    assert not counters.present
    assert acceptance_metrics(counters - counters) == {}


def test_unconditional_and_conditional_positions() -> None:
    """accepted_at[i] / drafts, and accepted_at[i] / accepted_at[i-1] (position 0 over drafts)."""
    delta = SpecCounters(drafts=100, draft_tokens=300, accepted=150, accepted_per_pos={0: 80, 1: 50, 2: 20},
                         present=True)
    metrics = acceptance_metrics(delta)
    assert metrics["spec_acceptance_rate"] == pytest.approx(0.5)
    assert metrics["spec_mean_acceptance_length"] == pytest.approx(2.5)
    assert [metrics[f"spec_acceptance_pos_{i}"] for i in range(3)] == pytest.approx([0.8, 0.5, 0.2])
    assert [metrics[f"spec_conditional_acceptance_pos_{i}"] for i in range(3)] == pytest.approx([0.8, 50 / 80, 0.4])
    assert metrics["spec_drafts"] == 100 and metrics["spec_accepted_tokens"] == 150


def test_conditional_after_a_dead_position_is_zero() -> None:
    """When nothing survives to position i-1, position i's conditional rate is 0, not a division by zero."""
    delta = SpecCounters(drafts=10, draft_tokens=30, accepted=2, accepted_per_pos={0: 2, 1: 0, 2: 0}, present=True)
    metrics = acceptance_metrics(delta)
    assert metrics["spec_conditional_acceptance_pos_2"] == 0.0


def test_no_drafts_in_the_window_gives_no_rates() -> None:
    """A window in which the server drafted nothing has no acceptance to report (not 0/0)."""
    counters = parse_counters(AFTER, model_name=MODEL)
    assert acceptance_metrics(counters - counters) == {}


def test_counters_add_for_pooling() -> None:
    """Deltas of repeats add up position by position."""
    a = SpecCounters(drafts=1, draft_tokens=3, accepted=2, accepted_per_pos={0: 1, 1: 1}, present=True)
    b = SpecCounters(drafts=2, draft_tokens=6, accepted=1, accepted_per_pos={0: 1, 2: 0}, present=True)
    total = a + b
    assert (total.drafts, total.draft_tokens, total.accepted) == (3, 9, 3)
    assert total.accepted_per_pos == {0: 2, 1: 1, 2: 0}


def test_relevant_lines_keep_only_spec_decode() -> None:
    """Raw snapshot files keep the spec_decode lines, which still parse to the same counters."""
    kept = relevant_lines(AFTER)
    assert "num_requests_running" not in kept
    assert parse_counters(kept, model_name=MODEL) == parse_counters(AFTER, model_name=MODEL)
