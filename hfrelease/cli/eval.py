"""`hfrelease eval`: parse options, call the eval stage (`hfrelease.stages.eval`) under a live view, print
its report, exit by it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hfrelease.cli.json_error import json_on_error

if TYPE_CHECKING:
    from rich.console import RenderableType

    from hfrelease.evaluation.plan import EvalPlan
    from hfrelease.evaluation.runner import EvalReport
    from hfrelease.speed.plan import SpeedPlan
    from hfrelease.speed.runner import SpeedReport
    from hfrelease.stages.eval import EvalPlanReport


@click.command("eval")
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--artifact", "artifacts", multiple=True, help="Evaluate only this artifact id (repeatable).")
@click.option("--gate", "gates", multiple=True, help="Run only this gate id (repeatable).")
@click.option("--endpoint", help="Attach to a running vLLM server (its base URL) instead of starting one.")
@click.option("--force", is_flag=True, help="Re-measure even when a matching result is recorded.")
@click.option("--dry-run", is_flag=True,
              help="Print every vllm serve, lm_eval and (--speed) vllm bench serve command as run; start nothing.")
@click.option("--speed", is_flag=True, help="Also run the speed anchors (workloads x speculative configs).")
@click.option("--speed-only", is_flag=True, help="Run only the speed anchors, no gates (implies --speed).")
@click.option("--workload", "workloads", multiple=True, help="Speed anchors: only this workload id (repeatable).")
@click.option("--run-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Where server and lm-eval logs go (default: runs/).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@json_on_error
def eval_(
    manifest: Path, artifacts: tuple[str, ...], gates: tuple[str, ...], endpoint: str | None,
    force: bool, dry_run: bool, speed: bool, run_dir: Path | None, as_json: bool,
    speed_only: bool = False, workloads: tuple[str, ...] = (),
) -> None:
    """Serve every artifact with vLLM, run its gates, record results in the ledger, gate against the reference.

    Each artifact's server starts once and all its gates use it; a gate already recorded for the same
    inputs (artifact hash, task, settings, harness versions) is not re-run. Exit 4 when a gate fails,
    5 when a server dies, 6 when a measurement is void (e.g. answers cut off by the budget).

    With --speed (or --speed-only) every workload is timed with `vllm bench serve` on one server per
    (artifact, speculative config); a point recorded for the same inputs is not re-measured, and draft
    artifacts are gated on acceptance and speedup (exit 4 when one fails).

    A draft named with --artifact is measured without --speed: its own job of the release, which serves it
    with its target on the workloads that name it (and the target without speculation beside it), then
    judges its draft gates.
    """
    from hfrelease.cli.output import print_json
    from hfrelease.stages.eval import EvalSettings, plan_eval_stage, run_eval_stage
    from hfrelease.stages.runner import exit_status

    settings = EvalSettings(manifest=manifest, artifacts=artifacts, gates=gates, workloads=workloads,
                            endpoint=endpoint, force=force, speed=speed, speed_only=speed_only, run_dir=run_dir)
    if dry_run:
        plan = plan_eval_stage(settings)
        if as_json:
            print_json(plan.as_dict())
        else:
            _print_plan(plan)
        return
    report = run_eval_stage(settings, views=_LiveViews())
    if as_json:
        print_json(report.as_dict())
    else:
        if report.gates is not None:
            _print_gates(report.gates)
        if report.speed is not None:
            _print_speed_report(report.speed)
    click.get_current_context().exit(exit_status(report))


# -- the plan (`--dry-run`) -----------------------------------------------------------------------------------

def _print_plan(report: EvalPlanReport) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import out_console

    data = report.as_dict()
    for server in data.get("servers", ()):
        pending = [g for g in server["gates"] if not g["cached"]]
        out_console.print(f"[bold]{server['artifact']}[/] — {len(pending)} of {len(server['gates'])} gates to run")
        _print_server(server, pending=bool(pending), what="gate")
        if pending and server["in_flight"] is not None:
            flight = server["in_flight"]
            # A budget from a sweep this run measures first is not known yet: the reason says what it will be.
            count = "" if flight["source"] == "sweep-first" else f"{flight['in_flight']} "
            out_console.print(f"  gates at once, {count}requests in flight: {flight['reason']}",
                              soft_wrap=True, markup=False)
        for gate in server["gates"]:
            mark = "recorded" if gate["cached"] else "run"
            out_console.print(f"    [{mark}] {gate['gate']}: {gate['command']}", soft_wrap=True, markup=False)
    for server in data.get("speed", {}).get("servers", ()):
        pending = [p for p in server["points"] if not p["cached"]]
        out_console.print(f"[bold]speed: {server['artifact']} {escape('[' + server['speculative'] + ']')}[/] — "
                          f"{len(pending)} of {len(server['points'])} points to measure")
        _print_server(server, pending=bool(pending), what="point")
        for point in server["points"]:
            mark = "recorded" if point["cached"] else "run"
            out_console.print(f"    [{mark}] {point['workload']} c{point['concurrency']} "
                              f"(warm-up: {point['warmups']} requests + every prompt once; {point['repeats']} repeats)",
                              markup=False)
            if not point["cached"]:
                for command in point["commands"]:
                    out_console.print(f"      {command}", soft_wrap=True, markup=False)


def _print_server(server: dict[str, Any], *, pending: bool, what: str) -> None:
    """A planned server's lines: why recorded results are unknown, the plugin install, the serve command."""
    from hfrelease.cli.output import out_console

    if server["unknown"]:
        # A Hub source the Hub did not identify: every result is shown to run, and the reason -- the
        # endpoint, offline mode -- is what to fix to know better.
        out_console.print(f"  note: recorded results not looked up, the content is unknown: {server['unknown']}",
                          soft_wrap=True, markup=False)
    if server["plugin"] and (pending or what == "gate"):
        out_console.print(f"  pip install --no-deps --no-build-isolation {server['plugin']}", soft_wrap=True,
                          markup=False)
    if pending and server.get("on_gate_server"):
        when = ("before its gates, whose budget is this sweep's knee" if server.get("before_gates")
                else "after its gates")
        out_console.print(f"  (on the gate server of {server['artifact']}, {when}: the same command)", markup=False)
    out_console.print(f"  {server['serve']}" if pending else f"  (no server: every {what} is recorded)",
                      soft_wrap=True, markup=False)


# -- the live view ------------------------------------------------------------------------------------------

class _LiveView:
    """A Rich live table: per server its state, per gate or speed point its progress; the last log lines."""

    def __init__(self, title: str, columns: tuple[str, ...], servers: list[str],
                 items: dict[tuple[str, str], str]) -> None:
        self.started = time.monotonic()
        self.title, self.columns = title, columns
        self.states = dict.fromkeys(servers, "waiting")
        self.items = items
        self.lines: list[str] = []
        self.loads: dict[str, str] = {}  # per artifact, its server's utilization so far

    def server_state(self, server_id: str, state: str) -> None:
        self.states[server_id] = state

    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None:
        self.items[(artifact_id, gate_id)] = f"{done}/{total} requests" if total else "preparing"

    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None:
        self.items[(artifact_id, gate_id)] = summary

    def point_progress(self, server_id: str, point_id: str, text: str) -> None:
        self.items[(server_id, point_id)] = text

    def server_load(self, artifact_id: str, summary: str) -> None:
        self.loads[artifact_id] = summary

    def log(self, message: str) -> None:
        from hfrelease.redact import redact

        self.lines = [*self.lines[-3:], redact(message)]

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.markup import escape
        from rich.text import Text

        from hfrelease.cli.output import make_table

        table = make_table(*self.columns, title=f"{self.title} — {time.monotonic() - self.started:.0f} s")
        for server_id, state in self.states.items():
            first = True
            for (sid, item), progress in self.items.items():
                if sid == server_id:
                    table.add_row(escape(server_id) if first else "", escape(state) if first else "", escape(item),
                                  escape(progress))
                    first = False
        loads = (Text(f"{aid} server: {text}", overflow="ellipsis", no_wrap=True) for aid, text in self.loads.items())
        return Group(table, *loads,
                     *(Text(line, style="dim", overflow="ellipsis", no_wrap=True) for line in self.lines))


class _LiveViews:
    """The stage's `EvalViews`: a live table while the gates run, another while the speed anchors do."""

    @contextlib.contextmanager
    def gates(self, plan: EvalPlan, run_dir: Path) -> Iterator[_LiveView]:
        view = _LiveView("hfrelease eval", ("artifact", "server", "gate", "progress"),
                         [job.artifact.id for job in plan.servers],
                         {(job.artifact.id, g.label): ("recorded" if not g.pending else "pending")
                          for job in plan.servers for g in job.gates})
        with _live(view, fold=f"eval: {', '.join(job.artifact.id for job in plan.servers)} (servers and gates)",
                   logs=f"logs: {run_dir}"):
            yield view

    @contextlib.contextmanager
    def speed(self, plan: SpeedPlan, run_dir: Path) -> Iterator[_LiveView]:
        view = _LiveView("hfrelease eval --speed", ("server", "state", "point", "progress"),
                         [job.label for job in plan.servers],
                         {(job.label, p.label): ("recorded" if not p.pending else "pending")
                          for job in plan.servers for p in job.points})
        with _live(view, fold="eval --speed: servers and benchmarks", logs=f"speed logs: {run_dir}"):
            yield view


@contextlib.contextmanager
def _live(view: _LiveView, *, fold: str, logs: str) -> Iterator[None]:
    """`view` drawn live while the block runs, in a GitHub Actions fold; then where the logs are."""
    from rich.console import Console
    from rich.live import Live

    from hfrelease.cli.output import err_console

    # The live view writes to its own copy of the terminal's stderr: while lm-eval and the benchmark run,
    # descriptors 1 and 2 are sent to the run's log, and the view must keep drawing on the terminal.
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    live_console = Console(file=terminal, highlight=False, width=err_console.width if not terminal.isatty() else None)
    _ci_fold(fold)
    try:
        with Live(get_renderable=view.render, console=live_console, refresh_per_second=4,
                  transient=False, redirect_stdout=False, redirect_stderr=False):
            yield
    finally:
        terminal.close()
        err_console.print(f"[dim]{logs}[/]")
        _ci_fold(None)


def _ci_fold(title: str | None) -> None:
    """Open a fold titled `title` (None closes it) when running on GitHub Actions."""
    from hfrelease.release.ci import CiEnvironment, group_end, group_start

    if CiEnvironment.detect().github_actions:
        click.echo(group_start(title) if title is not None else group_end(), err=True)


# -- the report ---------------------------------------------------------------------------------------------

def _print_gates(report: EvalReport) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import make_table, out_console

    table = make_table("artifact", "gate", "mode", "value", "Δ vs reference [95% CI]", "n", "cut/empty",
                       "verdict", title="Gates")
    colours = {"pass": "green", "reference": "cyan", "fail": "red", "void": "yellow", "no-reference": "yellow"}
    for row in report.rows:
        value = f"{row.value:.3f}" + (f" ± {row.stderr:.3f}" if row.stderr is not None else "")
        if row.comparison is not None:
            c = row.comparison
            delta = f"{c.delta:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}] (margin {c.margin:g})"
        else:
            delta = "—"
        verdict = f"[{colours.get(row.verdict, 'white')}]{row.verdict}[/]"
        if row.verdict in ("fail", "void", "no-reference"):
            verdict += f": {escape(row.reason)}"
        table.add_row(row.artifact_id, escape(row.label), row.mode, value, delta, str(row.n),
                      f"{row.truncated}/{row.empty}", verdict)
    out_console.print(table)
    for load in report.loads:
        out_console.print(f"{load.artifact_id}: {escape(load.summary())}", soft_wrap=True)
    out_console.print(
        f"{report.servers_started} server(s) started, {report.requests_sent} requests sent; "
        f"records in the ledger; logs in {report.run_dir}"
    )


def _ms(row: Any, name: str) -> str:
    value = row.metrics.get(name)
    return "—" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _print_speed_report(report: SpeedReport) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import make_table, out_console

    artifacts = list(dict.fromkeys(r.artifact_id for r in report.rows))
    # Rows come server by server; people read them workload by workload, configs in the order listed.
    workload_order = {w: i for i, w in enumerate(dict.fromkeys(r.workload_id for r in report.rows))}
    spec_order = {s: i for i, s in enumerate(dict.fromkeys(r.speculative for r in report.rows))}
    rows = sorted(report.rows, key=lambda r: (workload_order[r.workload_id], spec_order[r.speculative]))
    sweeps = {(r.artifact_id, r.workload_id, r.speculative) for r in report.rows if r.concurrency != 1}
    for artifact_id in artifacts:
        table = make_table("workload", "config", "tok/s \\[min, max]", "TTFT p50/p90 ms", "ITL p50/p90 ms",
                           "TPOT p50 ms", "acceptance (mean length)", "speedup", "status",
                           title=f"Speed — {artifact_id}, batch 1")
        for row in (r for r in rows if r.artifact_id == artifact_id and r.concurrency == 1):
            # A context sweep's point names its input length.
            _add_speed_row(table, row, first=row.workload_id + (f" @{row.input_len} tok" if row.input_len else ""))
        if table.row_count:
            out_console.print(table)
        for key in sorted(k for k in sweeps if k[0] == artifact_id):
            sweep = make_table("concurrency", "tok/s \\[min, max]", "TTFT p50/p90 ms", "ITL p50/p90 ms", "TPOT p50 ms",
                               "failed", "status", title=f"Sweep — {artifact_id}, {key[1]}, {key[2]}")
            for row in sorted((r for r in report.rows if (r.artifact_id, r.workload_id, r.speculative) == key),
                              key=lambda r: r.concurrency):
                spread = row.spread.get("output_throughput")
                tps = f"{row.throughput:.1f}" + (f" [{spread[0]:.1f}, {spread[1]:.1f}]" if spread else "")
                sweep.add_row(str(row.concurrency), tps,
                              f"{_ms(row, 'ttft_median_ms')}/{_ms(row, 'ttft_p90_ms')}",
                              f"{_ms(row, 'itl_median_ms')}/{_ms(row, 'itl_p90_ms')}", _ms(row, "tpot_median_ms"),
                              str(row.failed), _status(row))
            out_console.print(sweep)
    for best in report.best:
        if best.runner_up is None:
            continue  # one config measured: nothing was chosen
        note = "" if best.clear else f" (spread overlaps {best.runner_up}'s: not a clear win)"
        speedup = f", {best.speedup:.2f}x over none" if best.speedup is not None and best.speculative != "none" else ""
        out_console.print(f"best for {best.workload_id} on {best.artifact_id}: [bold]{best.speculative}[/] "
                          f"{best.throughput:.1f} tok/s{speedup}{note}")
    if report.draft_checks:
        checks = make_table("draft", "check", "served with", "workload", "config", "value", "threshold", "verdict",
                            title="Draft gates")
        for c in report.draft_checks:
            colour = "green" if c.verdict == "pass" else "red"
            value = "—" if c.value is None else f"{c.value:.3f}"
            threshold = "—" if c.threshold is None else f"{c.threshold:g}"
            checks.add_row(c.draft_id, c.check, c.artifact_id, c.workload_id, c.speculative, value, threshold,
                           f"[{colour}]{c.verdict}[/]" + (f": {escape(c.reason)}" if c.verdict == "fail" else ""))
        out_console.print(checks)
    for failure in report.failures:
        out_console.print(f"[red]server failed:[/] {escape(failure)}", soft_wrap=True)
    timing = report.timing
    shared = f" (+{report.servers_shared} gate server(s) shared)" if report.servers_shared else ""
    out_console.print(f"{report.servers_started} speed server(s) started{shared}, {len(report.records)} files "
                      f"recorded; {timing.measured:.0f} s measured of {timing.wall:.0f} s; logs in {report.run_dir}")


def _status(row: Any) -> str:
    from rich.markup import escape

    if row.status == "void":
        return f"[yellow]void[/]: {escape(row.reason or '')}"
    return "recorded" if row.origin == "recorded" else "measured"


def _add_speed_row(table: Any, row: Any, *, first: str) -> None:
    spread = row.spread.get("output_throughput")
    tps = f"{row.throughput:.1f}" + (f" [{spread[0]:.1f}, {spread[1]:.1f}]" if spread else "")
    acceptance = "—"
    if row.acceptance is not None:
        acceptance = f"{row.acceptance:.2f} ({row.metrics.get('spec_mean_acceptance_length', 0.0):.2f})"
    speedup = "—" if row.speedup is None else f"{row.speedup:.2f}x"
    table.add_row(first, row.speculative, tps, f"{_ms(row, 'ttft_median_ms')}/{_ms(row, 'ttft_p90_ms')}",
                  f"{_ms(row, 'itl_median_ms')}/{_ms(row, 'itl_p90_ms')}", _ms(row, "tpot_median_ms"), acceptance,
                  speedup, _status(row))

