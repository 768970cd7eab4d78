"""What `hfrelease eval --speed` prints of its best configs: the verdict's own reason (issue 24)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.speed.runner import SpeedReport
from hfrelease.speed.verdict import BestConfig
from hfrelease.stages.eval_view import speed_view
from hfrelease.stages.view import Line, Styled

pytestmark = pytest.mark.unit


def _lines(best: BestConfig, tmp_path: Path) -> list[str]:
    report = SpeedReport(rows=(), best=(best,), draft_checks=(), servers_started=0, failures=(), run_dir=tmp_path)
    return ["".join(p.text if isinstance(p, Styled) else p for p in block.parts)
            for block in speed_view(report) if isinstance(block, Line)]


def test_a_best_config_that_is_not_a_clear_win_says_why(tmp_path: Path) -> None:
    """Not "its spread overlaps" when the record's reason is the session noise or a losing point."""
    best = BestConfig(artifact_id="reference", workload_id="context", speculative="draft", throughput=97.7,
                      speedup=1.18, clear=False, runner_up="none",
                      not_clear="session noise unmeasured: no point of this host recorded in two sessions",
                      loses_at=("input 128 tokens: none 75.6 tok/s, draft 37.8",))
    line = next(text for text in _lines(best, tmp_path) if text.startswith("best for "))
    assert line == ("best for context on reference: draft 97.7 tok/s, 1.18x over none (not a clear win: session "
                    "noise unmeasured: no point of this host recorded in two sessions; slower at input 128 tokens: "
                    "none 75.6 tok/s, draft 37.8)")
    assert "overlaps" not in line
