"""Custom gates: what lm-eval does not cover (judged summarization, rewrite taxonomies, JSON parse rates).

A custom gate is a command or a Python entry point handed the running server's URL and model name. It
returns (a command: writes to the file given by `--out`) JSON of this shape:

    {"metrics": {"json_valid_rate": 0.97},            # the gate's metric must be among them
     "stderr":  {"json_valid_rate": 0.017},           # optional
     "samples": [{"id": "17", "score": 1.0,           # per-sample outcome of the gate's metric, or
                  "scores": {"json_valid_rate": 1.0},  # one per metric, when a gate reports several
                  "truncated": false, "empty": false, "response": "..."}]}

Command arguments appended by hfrelease: `--base-url URL --model NAME --out FILE --max-tokens N --seed N
--mode thinking|non-thinking` and `--limit N` when the gate sets one. A leading `python`/`python3` runs
with hfrelease's own interpreter; relative paths are relative to the manifest's directory (the cwd).

Either kind runs in a process of its own whose environment holds no credential: hfrelease's environment less
every variable `hfrelease.redact` treats as a secret (`public_environment`), so a gate's code never sees
HF_TOKEN. An entry point is called by hfrelease's interpreter in that process (`python -m
hfrelease.evaluation.custom_gate MODULE:FUNCTION` and the arguments above), its return value written as the
report; its module is imported from the manifest's directory (the cwd) as well as the installed packages.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hfrelease import shell
from hfrelease.errors import MeasurementError
from hfrelease.evaluation.gate_run import GateRun
from hfrelease.evaluation.idle_watch import idle_watched_runner
from hfrelease.evaluation.timeouts import gate_request_timeout
from hfrelease.manifest import Gate
from hfrelease.redact import public_environment

ENTRY_POINT_RUNNER = "hfrelease.evaluation.custom_gate"  # `python -m` this module calls an entry-point gate


def custom_gate_argv(gate: Gate, *, base_url: str, model: str, out: Path) -> list[str]:
    """The exact command line a custom gate runs with (shown by --dry-run too): its command, or hfrelease's
    interpreter calling its entry point."""
    if gate.entry_point is not None:
        argv = [sys.executable, "-m", ENTRY_POINT_RUNNER, gate.entry_point]
    else:
        assert gate.command is not None
        argv = list(gate.command)
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
    argv += ["--base-url", base_url, "--model", model, "--out", str(out), "--max-tokens", str(gate.max_tokens),
             "--seed", str(gate.seed), "--mode", gate.mode]
    if gate.limit is not None:
        argv += ["--limit", str(gate.limit)]
    return argv


def run_custom_gate(
    gate: Gate, *, base_url: str, model: str, cwd: Path, echo: Callable[[str], None] | None = None
) -> GateRun:
    """Run a command or entry-point gate against the server, in a process that holds no credential, and parse
    what it reports."""
    with tempfile.TemporaryDirectory(prefix="hfrelease-gate-") as tmp:
        out = Path(tmp) / "report.json"
        what = f"custom gate {gate.id!r}"
        # No harness counts a custom gate's requests, so the stall watchdog cannot tell a hung gate from a
        # busy one; the server's own counters can (hfrelease.evaluation.idle_watch).
        runner = idle_watched_runner(base_url, limit=gate_request_timeout(gate), what=what)
        shell.run(custom_gate_argv(gate, base_url=base_url, model=model, out=out), env=public_environment(),
                  cwd=cwd, echo=echo, error=MeasurementError, what=what, runner=runner,
                  hint="Run the command above by hand against the server to see why it failed.")
        try:
            report = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MeasurementError(f"custom gate {gate.id!r} wrote no valid JSON report to --out: {exc}") from None
    return parse_report(gate, report)


def parse_report(gate: Gate, report: Any) -> GateRun:
    """Validate a custom gate's report and turn it into a GateRun; a malformed report is a void measurement."""
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict):
        raise MeasurementError(f"custom gate {gate.id!r} reported no 'metrics' object")
    metrics = report["metrics"]
    value = metrics.get(gate.metric)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise MeasurementError(
            f"custom gate {gate.id!r} reported no finite {gate.metric!r} (it reported: {', '.join(map(str, metrics))})"
        )
    stderr_map = report.get("stderr") if isinstance(report.get("stderr"), dict) else {}
    raw_samples = report.get("samples", [])
    if not isinstance(raw_samples, list):
        raise MeasurementError(f"custom gate {gate.id!r}: 'samples' must be a list")
    samples: list[dict[str, Any]] = []
    for index, sample in enumerate(raw_samples):
        scores = sample.get("scores") if isinstance(sample, dict) else None
        score = scores.get(gate.metric) if isinstance(scores, dict) else None
        if score is None and isinstance(sample, dict):
            score = sample.get("score")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise MeasurementError(
                f"custom gate {gate.id!r}: samples[{index}] needs an id and a numeric score for {gate.metric!r}"
            )
        samples.append(
            {
                "doc_id": str(sample.get("id", index)),
                "score": float(score),
                "truncated": bool(sample.get("truncated", False)),
                "empty": bool(sample.get("empty", False)),
                "response": str(sample.get("response", ""))[:2000],
            }
        )
    all_metrics: dict[str, dict[str, float | None]] = {}
    for name, metric_value in metrics.items():
        if isinstance(metric_value, int | float) and not isinstance(metric_value, bool):
            err = stderr_map.get(name) if stderr_map else None
            all_metrics[str(name)] = {
                "value": float(metric_value), "stderr": float(err) if isinstance(err, int | float) else None,
            }
    stderr = all_metrics[gate.metric]["stderr"]
    return GateRun(
        value=float(value),
        stderr=stderr,
        metrics=all_metrics,
        samples=samples,
        n=len(samples),
        truncated=sum(s["truncated"] for s in samples),
        empty=sum(s["empty"] for s in samples),
        requests=len(samples),
        task_hash=None,
    )


def _call_entry_point(argv: Sequence[str]) -> None:
    """`python -m hfrelease.evaluation.custom_gate MODULE:FUNCTION --base-url URL ... --out FILE`: call the
    entry point with the gate's settings and write what it returns to --out as JSON."""
    parser = argparse.ArgumentParser(prog=f"python -m {ENTRY_POINT_RUNNER}")
    parser.add_argument("entry_point")
    for option in ("--base-url", "--model", "--out", "--mode"):
        parser.add_argument(option, required=True)
    for option in ("--max-tokens", "--seed"):
        parser.add_argument(option, type=int, required=True)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    module_name, _, function_name = args.entry_point.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    report = function(base_url=args.base_url, model=args.model, limit=args.limit, max_tokens=args.max_tokens,
                      seed=args.seed, mode=args.mode)
    Path(args.out).write_text(json.dumps(report), encoding="utf-8")


if __name__ == "__main__":
    _call_entry_point(sys.argv[1:])
