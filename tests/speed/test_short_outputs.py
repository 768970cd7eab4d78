"""A speed point whose outputs end far before `output_len` is said so: its tok/s is mostly time to first token
(issue 27, part 5: a model answering in 2 of 64 tokens was carded with no word of it). Planted records."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.ledger.record import LedgerRecord
from hfrelease.ledger.store import Ledger
from hfrelease.speed.bench import BenchResult
from hfrelease.speed.metrics import SpecCounters
from hfrelease.speed.records import short_outputs
from hfrelease.speed.summary import Repeat, summarise
from tests.ledger_pairs import write_speed

pytestmark = pytest.mark.unit


def _record(tmp_path: Path, mean: float | None, **generation: object) -> LedgerRecord:
    record = write_speed(Ledger(tmp_path), artifact="ref", draft=None, speculative="none", throughputs=(50.0,))
    extra = {**record.extra, **({"mean_output_tokens": mean} if mean is not None else {})}
    return record.model_copy(update={"extra": extra, "generation": {"output_len": 64, **generation}})


def test_the_summary_counts_the_tokens_every_repeat_generated() -> None:
    """Three repeats of 8 requests answering 2 tokens each: 48 tokens over 24 completed requests."""
    result = BenchResult(duration_s=1.0, completed=8, failed=0, total_output_tokens=16, output_throughput=16.0,
                         latencies_ms={}, spec={})
    summary = summarise([Repeat(result=result, spec=SpecCounters())] * 3)
    assert (summary.output_tokens, summary.completed) == (48, 24)


def test_outputs_ending_far_before_the_budget_are_said(tmp_path: Path) -> None:
    """2 of 64 tokens: said, with what the figure then is and what to do."""
    said = short_outputs(_record(tmp_path, 2.0))
    assert said is not None and "end after 2 of 64 tokens" in said and "time to first token" in said
    assert "ignore_eos" in said


@pytest.mark.parametrize(("mean", "generation"), [(40.0, {}), (2.0, {"ignore_eos": True}), (None, {})],
                         ids=["long enough", "ignore_eos", "not recorded"])
def test_outputs_that_run_long_enough_are_not(tmp_path: Path, mean: float | None, generation: dict[str, object]
                                              ) -> None:
    """Outputs past a quarter of the budget, a workload that ignores EOS, or a record from before the field."""
    assert short_outputs(_record(tmp_path, mean, **generation)) is None
