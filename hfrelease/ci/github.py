"""CI awareness: GitHub Actions folds (`::group::`), step summaries, and job outputs, as plain values.

GitHub reads workflow commands from a job's output and Markdown from the file `GITHUB_STEP_SUMMARY`
names; `GITHUB_OUTPUT` takes `name=value` lines that later jobs read (e.g. the artifacts of the eval
matrix). This module only builds those strings and appends to those files; the CLI decides when.
Docs: https://docs.github.com/actions/reference/workflow-commands-for-github-actions
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.redact import redact
from hfrelease.verdicts import severity

if TYPE_CHECKING:
    from hfrelease.evaluation.judging import GateRow
    from hfrelease.speed.runner import SpeedReport
    from hfrelease.speed.verdict import DraftCheck


@dataclass(frozen=True, kw_only=True)
class CiEnvironment:
    """What the CI a command runs under offers: folds, a step summary file, a job output file."""

    github_actions: bool
    step_summary: Path | None
    output: Path | None

    @classmethod
    def detect(cls, env: Mapping[str, str] | None = None) -> CiEnvironment:
        """Read the variables GitHub Actions sets on every runner (`os.environ` unless `env` is given)."""
        env = os.environ if env is None else env
        summary = env.get("GITHUB_STEP_SUMMARY")
        output = env.get("GITHUB_OUTPUT")
        return cls(
            github_actions=env.get("GITHUB_ACTIONS") == "true",
            step_summary=Path(summary) if summary else None,
            output=Path(output) if output else None,
        )


def _escape_data(text: str) -> str:
    # The runner's own escaping for a command's message: a newline would end the command early.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def group_start(title: str) -> str:
    """The line that opens a fold titled `title` in the job log."""
    return f"::group::{_escape_data(title)}"


def group_end() -> str:
    """The line that closes the innermost open fold."""
    return "::endgroup::"


@contextlib.contextmanager
def folded(title: str, emit: Callable[[str], None], *, env: Mapping[str, str] | None = None) -> Iterator[None]:
    """On GitHub Actions, what the block prints in a fold titled `title` (its two lines go to `emit`, closing
    also when the block raises); elsewhere nothing is added."""
    fold = CiEnvironment.detect(env).github_actions
    if fold:
        emit(group_start(title))
    try:
        yield
    finally:
        if fold:
            emit(group_end())


def append_summary(path: Path, markdown: str) -> None:
    """Append Markdown to the step summary; secrets are redacted, as in every other output."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(redact(markdown).rstrip("\n") + "\n\n")


def set_output(path: Path, name: str, value: str) -> None:
    """Append one job output; the heredoc form with a random delimiter keeps any value on its own lines."""
    delimiter = f"ghadelimiter_{secrets.token_hex(8)}"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def _cell(value: object) -> str:
    # A '|' would split a cell and a newline would end the row.
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


_VERDICT_MARKS = {"pass": "✅ pass", "reference": "reference", "fail": "❌ fail", "void": "⚠️ void",
                  "no-reference": "⚠️ no reference"}


def gate_summary(rows: Sequence[GateRow], *, title: str = "Gates") -> str:
    """The gate table of `hfrelease eval` as Markdown: value, paired delta with its interval, verdict."""
    body = []
    for row in rows:
        value = f"{row.value:.3f}" + (f" ± {row.stderr:.3f}" if row.stderr is not None else "")
        delta = "—"
        if row.comparison is not None:
            c = row.comparison
            delta = f"{c.delta:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}] (margin {c.margin:g})"
        verdict = _VERDICT_MARKS.get(row.verdict, row.verdict)
        if severity.shows_reason(row.verdict):
            verdict += f": {row.reason}"
        body.append((row.artifact_id, row.label, row.mode, value, delta, row.n, f"{row.truncated}/{row.empty}",
                     row.origin, verdict))
    table = markdown_table(("artifact", "gate", "mode", "value", "Δ vs reference [95% CI]", "n", "cut/empty",
                            "origin", "verdict"), body)
    return f"### {title}\n\n{table}" if body else f"### {title}\n\nNo gate ran."


def _number(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def speed_summary(report: SpeedReport) -> str:
    """The speed anchors of `hfrelease eval --speed` as Markdown: one row per point, then the draft gates."""
    body = [
        (r.artifact_id, r.workload_id, r.speculative, r.concurrency, _number(r.throughput),
         _number(r.metrics.get("ttft_median_ms")), _number(r.metrics.get("tpot_median_ms"), 2),
         _number(r.acceptance, 2), "—" if r.speedup is None else f"{r.speedup:.2f}x",
         f"void: {r.reason}" if r.status == "void" else r.origin)
        for r in report.rows
    ]
    parts = ["### Speed", markdown_table(("artifact", "workload", "speculative", "concurrency", "tok/s",
                                          "TTFT p50 ms", "TPOT p50 ms", "acceptance", "speedup", "status"), body)]
    if report.draft_checks:
        parts.append(draft_gate_summary(report.draft_checks))
    parts += [f"- server failed: {failure}" for failure in report.failures]
    return "\n\n".join(parts)


def draft_gate_summary(draft_checks: Sequence[DraftCheck], *, title: str = "#### Draft gates") -> str:
    """Draft-gate verdicts as Markdown (a draft's eval job, and the merge job's decision)."""
    checks = [(c.draft_id, c.check, c.artifact_id, c.workload_id, c.speculative, _number(c.value, 3),
               "—" if c.threshold is None else f"{c.threshold:g}",
               "✅ pass" if c.verdict == "pass" else f"❌ fail: {c.reason}")
              for c in draft_checks]
    return f"{title}\n\n" + markdown_table(("draft", "check", "served with", "workload", "config", "value",
                                             "threshold", "verdict"), checks)
