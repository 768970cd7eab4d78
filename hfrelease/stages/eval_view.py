"""What `hfrelease eval` prints: its plan (`--dry-run`), its gates and its speed anchors, as a view
(`hfrelease.stages.view`) the CLI draws."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hfrelease.evaluation.judging import failure_advice
from hfrelease.stages.view import Block, Cell, Styled, line, table
from hfrelease.verdicts import severity

if TYPE_CHECKING:
    from hfrelease.evaluation.plan import EvalPlan
    from hfrelease.evaluation.runner import EvalReport
    from hfrelease.speed.plan import SpeedPlan
    from hfrelease.speed.runner import SpeedReport
    from hfrelease.stages.eval import EvalPlanReport, EvalStageReport

_VERDICT_STYLE = {"pass": "green", "reference": "cyan", "fail": "red", "void": "yellow", "no-reference": "yellow"}


def stage_view(report: EvalStageReport) -> list[Block]:
    """The gates' table and the speed anchors' tables, as far as each ran."""
    return [*(gates_view(report.gates) if report.gates is not None else ()),
            *(speed_view(report.speed) if report.speed is not None else ())]


def plan_view(report: EvalPlanReport) -> list[Block]:
    """Each planned server, what runs on it and what is recorded already, with every command as run."""
    data, view = report.as_dict(), list[Block]()
    for server in data.get("servers", ()):
        pending = [g for g in server["gates"] if not g["cached"]]
        view.append(line(Styled(server["artifact"], "bold"), f" — {len(pending)} of {len(server['gates'])} gates "
                         "to run", wrap=True))
        view += _server(server, pending=bool(pending), what="gate")
        if pending and server["in_flight"] is not None:
            flight = server["in_flight"]
            # A budget from a sweep this run measures first is not known yet: the reason says what it will be.
            count = "" if flight["source"] == "sweep-first" else f"{flight['in_flight']} "
            view.append(line(f"  gates at once, {count}requests in flight: {flight['reason']}"))
        view += [line(f"    [{'recorded' if g['cached'] else 'run'}] {g['gate']}: {g['command']}")
                 for g in server["gates"]]
    for server in data.get("speed", {}).get("servers", ()):
        pending = [p for p in server["points"] if not p["cached"]]
        view.append(line(Styled(f"speed: {server['artifact']} [{server['speculative']}]", "bold"),
                         f" — {len(pending)} of {len(server['points'])} points to measure", wrap=True))
        view += _server(server, pending=bool(pending), what="point")
        for point in server["points"]:
            view.append(line(f"    [{'recorded' if point['cached'] else 'run'}] {point['workload']} "
                             f"c{point['concurrency']} (warm-up: {point['warmups']} requests + every prompt once; "
                             f"{point['repeats']} repeats)", wrap=True))
            if not point["cached"]:
                view += [line(f"      {command}") for command in point["commands"]]
    return view


def _server(server: dict[str, Any], *, pending: bool, what: str) -> list[Block]:
    """A planned server's lines: why recorded results are unknown, the plugin install, the serve command."""
    view = list[Block]()
    if server["unknown"]:
        # A Hub source the Hub did not identify: every result is shown to run, and the reason -- the
        # endpoint, offline mode -- is what to fix to know better.
        view.append(line(f"  note: recorded results not looked up, the content is unknown: {server['unknown']}"))
    if server["plugin"] and (pending or what == "gate"):
        view.append(line(f"  pip install --no-deps --no-build-isolation {server['plugin']}"))
    if pending and server.get("on_gate_server"):
        when = ("before its gates, whose budget is this sweep's knee" if server.get("before_gates")
                else "after its gates")
        view.append(line(f"  (on the gate server of {server['artifact']}, {when}: the same command)", wrap=True))
    view.append(line(f"  {server['serve']}" if pending else f"  (no server: every {what} is recorded)"))
    return view


def gates_view(report: EvalReport) -> list[Block]:
    """One row per gate result: value, difference from the reference with its interval, verdict and why."""
    rows = list[tuple[Cell, ...]]()
    for row in report.rows:
        value = f"{row.value:.3f}" + (f" ± {row.stderr:.3f}" if row.stderr is not None else "")
        if row.comparison is not None:
            c = row.comparison
            delta = f"{c.delta:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}] (margin {c.margin:g})"
        else:
            delta = "—"
        why = f": {row.reason}" if severity.shows_reason(row.verdict) else ""
        rows.append((row.artifact_id, row.label, row.mode, value, delta, str(row.n), f"{row.truncated}/{row.empty}",
                     (Styled(row.verdict, _VERDICT_STYLE.get(row.verdict, "white")), why)))
    return [
        table("Gates", ("artifact", "gate", "mode", "value", "Δ vs reference [95% CI]", "n", "cut/empty", "verdict"),
              rows),
        *(line(advice, wrap=True) for advice in map(failure_advice, report.rows) if advice),
        *(line(f"{load.artifact_id}: {load.summary()}") for load in report.loads),
        line(f"{report.servers_started} server(s) started, {report.requests_sent} requests sent; records in the "
             f"ledger; logs in {report.run_dir}", wrap=True),
    ]


def _ms(row: Any, name: str) -> str:
    value = row.metrics.get(name)
    return "—" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _tps(row: Any) -> str:
    spread = row.spread.get("output_throughput")
    return f"{row.throughput:.1f}" + (f" [{spread[0]:.1f}, {spread[1]:.1f}]" if spread else "")


def _status(row: Any) -> Cell:
    if row.status == "void":
        return (Styled("void", "yellow"), f": {row.reason or ''}")
    return "recorded" if row.origin == "recorded" else "measured"


def _timings(row: Any) -> tuple[str, str, str]:
    return (f"{_ms(row, 'ttft_median_ms')}/{_ms(row, 'ttft_p90_ms')}",
            f"{_ms(row, 'itl_median_ms')}/{_ms(row, 'itl_p90_ms')}", _ms(row, "tpot_median_ms"))


def speed_view(report: SpeedReport) -> list[Block]:
    """Per artifact its batch-1 table and its concurrency sweeps; the best config; the draft gates; failures."""
    view = list[Block]()
    # Rows come server by server; people read them workload by workload, configs in the order listed.
    workload_order = {w: i for i, w in enumerate(dict.fromkeys(r.workload_id for r in report.rows))}
    spec_order = {s: i for i, s in enumerate(dict.fromkeys(r.speculative for r in report.rows))}
    rows = sorted(report.rows, key=lambda r: (workload_order[r.workload_id], spec_order[r.speculative]))
    sweeps = {(r.artifact_id, r.workload_id, r.speculative) for r in report.rows if r.concurrency != 1}
    for artifact_id in dict.fromkeys(r.artifact_id for r in report.rows):
        batch1 = list[tuple[Cell, ...]]()
        for row in (r for r in rows if r.artifact_id == artifact_id and r.concurrency == 1):
            acceptance = "—"
            if row.acceptance is not None:
                acceptance = f"{row.acceptance:.2f} ({row.metrics.get('spec_mean_acceptance_length', 0.0):.2f})"
            # A context sweep's point names its input length.
            batch1.append((row.workload_id + (f" @{row.input_len} tok" if row.input_len else ""), row.speculative,
                           _tps(row), *_timings(row), acceptance,
                           "—" if row.speedup is None else f"{row.speedup:.2f}x", _status(row)))
        if batch1:
            view.append(table(f"Speed — {artifact_id}, batch 1", (
                "workload", "config", "tok/s [min, max]", "TTFT p50/p90 ms", "ITL p50/p90 ms", "TPOT p50 ms",
                "acceptance (mean length)", "speedup", "status"), batch1))
        for key in sorted(k for k in sweeps if k[0] == artifact_id):
            points = sorted((r for r in report.rows if (r.artifact_id, r.workload_id, r.speculative) == key),
                            key=lambda r: r.concurrency)
            view.append(table(f"Sweep — {artifact_id}, {key[1]}, {key[2]}", (
                "concurrency", "tok/s [min, max]", "TTFT p50/p90 ms", "ITL p50/p90 ms", "TPOT p50 ms", "failed",
                "status"), [(str(r.concurrency), _tps(r), *_timings(r), str(r.failed), _status(r)) for r in points]))
    for best in report.best:
        if best.runner_up is None:
            continue  # one config measured: nothing was chosen
        # Why not, as the speed-best record keeps it (README "How speed verdicts decide"): its batch-1 lead against
        # the host's session noise, and each other point of the workload where it loses.
        why = "; ".join([*([best.not_clear] if best.not_clear else []), *(f"slower at {p}" for p in best.loses_at)])
        overlap = f"its spread overlaps {best.runner_up}'s"
        note = "" if best.clear else f" (not a clear win: {why or overlap})"
        speedup = f", {best.speedup:.2f}x over none" if best.speedup is not None and best.speculative != "none" else ""
        view.append(line(f"best for {best.workload_id} on {best.artifact_id}: ", Styled(best.speculative, "bold"),
                         f" {best.throughput:.1f} tok/s{speedup}{note}", wrap=True))
    if report.draft_checks:
        view.append(table("Draft gates", (
            "draft", "check", "served with", "workload", "config", "value", "threshold", "verdict"), [
            (c.draft_id, c.check, c.artifact_id, c.workload_id, c.speculative,
             "—" if c.value is None else f"{c.value:.3f}", "—" if c.threshold is None else f"{c.threshold:g}",
             (Styled(c.verdict, "green" if c.verdict == "pass" else "red"), f": {c.reason}"
              if severity.shows_reason(c.verdict) else "")) for c in report.draft_checks]))
    view += [line(Styled("server failed:", "red"), f" {failure}") for failure in report.failures]
    timing = report.timing
    shared = f" (+{report.servers_shared} gate server(s) shared)" if report.servers_shared else ""
    view.append(line(f"{report.servers_started} speed server(s) started{shared}, {len(report.records)} files "
                     f"recorded; {timing.measured:.0f} s measured of {timing.wall:.0f} s; logs in {report.run_dir}",
                     wrap=True))
    return view


class LiveProgress:
    """What `hfrelease eval`'s live view shows, kept from the stage's events (`EvalEvents`, `SpeedEvents`):
    per server its state, per gate or speed point its progress; the servers' utilization; the last log lines."""

    def __init__(self, title: str, columns: tuple[str, ...], servers: list[str],
                 items: dict[tuple[str, str], str]) -> None:
        self.started = time.monotonic()
        self.title, self.columns = title, columns
        self.states = dict.fromkeys(servers, "waiting")
        self.items = items
        self.lines: list[str] = []
        self.loads: dict[str, str] = {}  # per artifact, its server's utilization so far

    @classmethod
    def of_gates(cls, plan: EvalPlan) -> LiveProgress:
        return cls("hfrelease eval", ("artifact", "server", "gate", "progress"),
                   [job.artifact.id for job in plan.servers],
                   {(job.artifact.id, g.label): ("recorded" if not g.pending else "pending")
                    for job in plan.servers for g in job.gates})

    @classmethod
    def of_speed(cls, plan: SpeedPlan) -> LiveProgress:
        return cls("hfrelease eval --speed", ("server", "state", "point", "progress"),
                   [job.label for job in plan.servers],
                   {(job.label, p.label): ("recorded" if not p.pending else "pending")
                    for job in plan.servers for p in job.points})

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

    def view(self) -> list[Block]:
        """The table of servers and their items, then one line per server's load and per log line, each cut
        to the width (a live view must keep its height)."""
        rows = list[tuple[Cell, ...]]()
        for server_id, state in self.states.items():
            first = True
            for (sid, item), progress in self.items.items():
                if sid == server_id:
                    rows.append((server_id if first else "", state if first else "", item, progress))
                    first = False
        return [table(f"{self.title} — {time.monotonic() - self.started:.0f} s", self.columns, rows),
                *(line(f"{aid} server: {text}", clip=True) for aid, text in self.loads.items()),
                *(line(Styled(text, "dim"), clip=True) for text in self.lines)]


class Draw(Protocol):
    """A live display (the CLI's): `progress` drawn while the context is open, in a CI fold titled `fold`;
    after it, where the logs are (`logs`)."""

    def __call__(self, progress: LiveProgress, *, fold: str, logs: str) -> AbstractContextManager[None]: ...


class LiveViews:
    """The eval stage's `EvalViews` for a live display: a table while the gates run, another while the speed
    anchors do, each with its fold's title and where its logs are; `draw` draws them."""

    def __init__(self, draw: Draw) -> None:
        self.draw = draw

    @contextlib.contextmanager
    def gates(self, plan: EvalPlan, run_dir: Path) -> Iterator[LiveProgress]:
        with self.draw(progress := LiveProgress.of_gates(plan), logs=f"logs: {run_dir}",
                       fold=f"eval: {', '.join(job.artifact.id for job in plan.servers)} (servers and gates)"):
            yield progress

    @contextlib.contextmanager
    def speed(self, plan: SpeedPlan, run_dir: Path) -> Iterator[LiveProgress]:
        with self.draw(progress := LiveProgress.of_speed(plan), fold="eval --speed: servers and benchmarks",
                       logs=f"speed logs: {run_dir}"):
            yield progress
