"""`hfrelease eval`: parse options, show the plan or a live view, print the gate table, exit by verdict."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from hfrelease.cli.json_error import json_on_error

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from rich.console import RenderableType

    from hfrelease.evaluation.plan import EvalPlan, ServerJob
    from hfrelease.evaluation.runner import AfterGates, EvalReport
    from hfrelease.ledger.hashing import HashCache
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import Manifest
    from hfrelease.serving.command import ServeCommand
    from hfrelease.serving.process import VllmServer
    from hfrelease.speed.plan import SpeedPlan
    from hfrelease.speed.runner import SpeedReport, SpeedSession


def cache_dir() -> Path:
    return Path(os.environ.get("HFRELEASE_CACHE") or Path.home() / ".cache" / "hfrelease")


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
@click.option("--run-dir", type=click.Path(path_type=Path), help="Where server and lm-eval logs go (default: runs/).")
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
    from hfrelease.evaluation.plan import plan_eval
    from hfrelease.ledger.hashing import HashCache
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import find_manifest, load_manifest

    speed = speed or speed_only
    loaded = load_manifest(manifest)
    if endpoint is None:  # the serve guard, in dry runs too: vLLM's parser reads the manifest's args
        from hfrelease.serving.guard import require_safe_manifest

        require_safe_manifest(loaded, source=str(find_manifest(manifest)))
    # A draft's job (the release matrix runs `eval --artifact DRAFT` like any other entry): its speed
    # anchors are its gates, so it runs them without --speed; other artifacts named beside it run their gates.
    drafts = () if speed else tuple(a for a in artifacts if a in {d.id for d in loaded.artifact if d.kind == "draft"})
    if drafts:
        speed = True
        speed_only = len(drafts) == len(artifacts)
        artifacts = tuple(a for a in artifacts if a not in drafts) or drafts
        gates = () if speed_only else gates
    _check_speed_options(speed=speed, speed_only=speed_only, workloads=workloads, gates=gates, endpoint=endpoint)
    if endpoint is not None and len(artifacts) != 1:
        raise click.UsageError("--endpoint attaches to one server: name its artifact with --artifact ID")
    ledger = Ledger(loaded.root / "results")
    cache = HashCache(cache_dir() / "hashes.json")
    if speed_only:
        _eval_speed(loaded, ledger=ledger, cache=cache, artifacts=artifacts, workloads=workloads, force=force,
                    dry_run=dry_run, run_dir=run_dir, as_json=as_json, drafts=drafts)
        return
    plan = plan_eval(loaded, ledger=ledger, hash_cache=cache, artifacts=artifacts, gates=gates, force=force,
                     download=not dry_run)
    cache.save()
    if dry_run:
        if speed:
            _print_with_speed(lambda: _print_plan(plan, as_json=as_json), loaded, ledger=ledger, cache=cache,
                              artifacts=artifacts, workloads=workloads, force=force, as_json=as_json,
                              gate_servers={job.artifact.id for job in plan.servers if job.pending}, drafts=drafts)
            return
        _print_plan(plan, as_json=as_json)
        return
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    directory = run_dir or Path("runs") / f"{loaded.family.name}-{stamp}"
    session = None
    if speed:
        # Planned before the gates run, so each gate server can also serve its artifact's no-speculation
        # speed points (the same `vllm serve` command) before it stops: one start per artifact, not two.
        from hfrelease.speed.runner import SpeedSession

        speed_plan = _plan_speed(loaded, ledger=ledger, cache=cache, artifacts=artifacts, workloads=workloads,
                                 force=force, dry_run=False, drafts=drafts)
        session = SpeedSession(speed_plan, ledger=ledger, run_dir=directory)
    report = _run_live(plan, ledger=ledger, run_dir=directory, cache=cache, endpoint=endpoint, as_json=as_json,
                       speed=session, force=force)
    cache.save()
    if session is not None:
        code = _run_with_speed(lambda: _print_report(report, as_json=as_json, hash_bytes_read=cache.bytes_read),
                               report.exit_code, session, as_json=as_json)
        click.get_current_context().exit(int(code))
    _print_report(report, as_json=as_json, hash_bytes_read=cache.bytes_read)
    click.get_current_context().exit(int(report.exit_code))


def _print_plan(plan: EvalPlan, *, as_json: bool) -> None:
    from hfrelease.cli.output import out_console, print_json
    from hfrelease.evaluation.plan import describe_gate, model_files, serve_command

    servers: list[dict[str, Any]] = []
    for job in plan.servers:
        # The runner's own command builders, with placeholders for what only exists at run time.
        command = serve_command(plan.manifest, job, port=0)
        argv = _port_placeholder(command.argv)
        base = "http://127.0.0.1:<port>"
        files = model_files(job.artifact, job.model_dir)
        servers.append({
            "artifact": job.artifact.id,
            "serve": _display_with_port(command),
            "argv": argv,
            "plugin": command.plugin,
            "unknown": job.unknown,
            "gates": [
                {"gate": g.gate.id, "cached": not g.pending, "input_key": g.input_key or None,
                 "command": describe_gate(plan.manifest, g, base_url=base, model=job.artifact.repo, files=files)}
                for g in job.gates
            ],
        })
    if as_json:
        print_json({"family": plan.manifest.family.name, "pending": plan.pending, "servers": servers})
        return
    for server in servers:
        pending = [g for g in server["gates"] if not g["cached"]]
        out_console.print(f"[bold]{server['artifact']}[/] — {len(pending)} of {len(server['gates'])} gates to run")
        if server["unknown"]:
            _print_unknown(server["unknown"])
        if server["plugin"]:
            out_console.print(f"  pip install --no-deps --no-build-isolation {server['plugin']}", soft_wrap=True,
                              markup=False)
        out_console.print(f"  {server['serve']}" if pending else "  (no server: every gate is recorded)",
                          soft_wrap=True, markup=False)
        for gate in server["gates"]:
            mark = "recorded" if gate["cached"] else "run"
            out_console.print(f"    [{mark}] {gate['gate']}: {gate['command']}", soft_wrap=True, markup=False)


def _print_unknown(why: str) -> None:
    """Why a dry run could not look up recorded results (a Hub source the Hub did not identify): every one
    is then shown to run, and the reason -- the endpoint, offline mode -- is what to fix to know better."""
    from hfrelease.cli.output import out_console

    out_console.print(f"  note: recorded results not looked up, the content is unknown: {why}", soft_wrap=True,
                      markup=False)


def _port_placeholder(argv: Sequence[str]) -> list[str]:
    """`argv` built with port 0, the value of `--port` shown as `<port>` (the runner picks a free one)."""
    return [("<port>" if word == "0" and i and argv[i - 1] == "--port" else word) for i, word in enumerate(argv)]


def _display_with_port(command: ServeCommand) -> str:
    from dataclasses import replace

    return replace(command, argv=tuple(_port_placeholder(command.argv))).display()


class _LiveView:
    """The Rich live view: per artifact, the server's state and each gate's requests done / total."""

    def __init__(self, plan: EvalPlan) -> None:
        self.started = time.monotonic()
        self.states: dict[str, str] = {job.artifact.id: "waiting" for job in plan.servers}
        self.gates: dict[tuple[str, str], str] = {
            (job.artifact.id, g.gate.id): ("recorded" if not g.pending else "pending")
            for job in plan.servers for g in job.gates
        }
        self.lines: list[str] = []

    def server_state(self, artifact_id: str, state: str) -> None:
        self.states[artifact_id] = state

    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None:
        self.gates[(artifact_id, gate_id)] = f"{done}/{total} requests" if total else "preparing"

    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None:
        self.gates[(artifact_id, gate_id)] = summary

    def log(self, message: str) -> None:
        from hfrelease.redact import redact

        self.lines = [*self.lines[-3:], redact(message)]

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.text import Text

        from hfrelease.cli.output import make_table

        table = make_table("artifact", "server", "gate", "progress",
                           title=f"hfrelease eval — {time.monotonic() - self.started:.0f} s")
        for artifact_id, state in self.states.items():
            first = True
            for (aid, gate_id), progress in self.gates.items():
                if aid != artifact_id:
                    continue
                table.add_row(artifact_id if first else "", state if first else "", gate_id, progress)
                first = False
        return Group(table, *(Text(line, style="dim", overflow="ellipsis", no_wrap=True) for line in self.lines))


class _SpeedOnGateServer:
    """Speed events of points measured on a gate server, shown in the gate view's row of that artifact."""

    def __init__(self, view: _LiveView, artifact_id: str) -> None:
        self.view = view
        self.artifact_id = artifact_id

    def server_state(self, server_id: str, state: str) -> None:
        self.view.server_state(self.artifact_id, f"speed: {state}")

    def point_progress(self, server_id: str, point_id: str, text: str) -> None:
        self.view.server_state(self.artifact_id, f"speed {point_id}: {text}")

    def log(self, message: str) -> None:
        self.view.log(message)


def _run_live(
    plan: EvalPlan, *, ledger: Any, run_dir: Path, cache: Any, endpoint: str | None, as_json: bool,
    speed: SpeedSession | None = None, force: bool = False,
) -> EvalReport:
    from rich.console import Console
    from rich.live import Live

    from hfrelease.cli.output import err_console
    from hfrelease.evaluation.runner import run_eval

    # The live view writes to its own copy of the terminal's stderr: while lm-eval runs, descriptor 2
    # is sent to the run's log (see runner.stderr_to), and the view must keep drawing on the terminal.
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    live_console = Console(file=terminal, highlight=False, width=err_console.width if not terminal.isatty() else None)
    view = _LiveView(plan)

    def terminate(signum: int, frame: FrameType | None) -> None:
        # SIGTERM (CI cancelling a job) unwinds like Ctrl-C: servers are stopped, finished gates kept.
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    _ci_fold(f"eval: {', '.join(job.artifact.id for job in plan.servers)} (servers and gates)")
    try:
        with Live(get_renderable=view.render, console=live_console, refresh_per_second=4,
                  transient=False, redirect_stdout=False, redirect_stderr=False):
            report = run_eval(plan, ledger=ledger, run_dir=run_dir, hash_cache=cache, endpoint=endpoint, events=view,
                              after_gates=_sharing(speed, view) if speed is not None else None,
                              request_cache=cache_dir() / "requests", force=force)
        _ci_summary(gates=report)
        return report
    finally:
        signal.signal(signal.SIGTERM, previous)
        terminal.close()
        err_console.print(f"[dim]logs: {run_dir}[/]")
        _ci_fold(None)


def _sharing(session: SpeedSession, view: _LiveView) -> AfterGates:
    """The `after_gates` hook that measures an artifact's no-speculation speed points on its gate server."""

    def after_gates(job: ServerJob, server: VllmServer, command: ServeCommand) -> None:
        speed_job = session.shareable(job.artifact.id, command)
        if speed_job is not None:
            session.measure_on(speed_job, server, command, events=_SpeedOnGateServer(view, job.artifact.id))

    return after_gates


def _print_report(report: EvalReport, *, as_json: bool, hash_bytes_read: int) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import make_table, out_console, print_json

    if as_json:
        print_json({
            "exit_code": int(report.exit_code),
            "servers_started": report.servers_started,
            "requests_sent": report.requests_sent,
            "run_dir": str(report.run_dir),
            "hash_bytes_read": hash_bytes_read,
            "rows": [row.as_dict() for row in report.rows],
        })
        return
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
    out_console.print(
        f"{report.servers_started} server(s) started, {report.requests_sent} requests sent; "
        f"records in the ledger; logs in {report.run_dir}"
    )


# -- speed anchors (`--speed`, `--speed-only`) ---------------------------------------------------------------

# When gates and speed anchors both ran, the exit status is the most serious of the two.
_SEVERITY = (5, 6, 4, 0)


def _worst(*codes: int) -> int:
    return min(codes, key=lambda c: _SEVERITY.index(c) if c in _SEVERITY else -1)


def _check_speed_options(
    *, speed: bool, speed_only: bool, workloads: tuple[str, ...], gates: tuple[str, ...], endpoint: str | None,
) -> None:
    if workloads and not speed:
        raise click.UsageError("--workload selects speed anchors: add --speed or --speed-only")
    if speed_only and gates:
        raise click.UsageError("--gate selects gates, which --speed-only skips")
    if speed and endpoint is not None:
        raise click.UsageError("--endpoint attaches to one server; speed anchors start one per speculative config")


def _plan_speed(
    loaded: Manifest, *, ledger: Ledger, cache: HashCache, artifacts: tuple[str, ...], workloads: tuple[str, ...],
    force: bool, dry_run: bool, drafts: tuple[str, ...] = (),
) -> SpeedPlan:
    """The speed plan of `--speed`, or with `drafts` (no --speed) the draft jobs of those drafts."""
    from hfrelease.speed.drafts import plan_drafts
    from hfrelease.speed.plan import plan_speed

    if drafts:
        plan = plan_drafts(loaded, drafts, ledger=ledger, hash_cache=cache, workloads=workloads, force=force,
                           download=not dry_run)
    else:
        plan = plan_speed(loaded, ledger=ledger, hash_cache=cache, artifacts=artifacts, workloads=workloads,
                          force=force, download=not dry_run)
    cache.save()
    return plan


def _eval_speed(
    loaded: Manifest, *, ledger: Ledger, cache: HashCache, artifacts: tuple[str, ...], workloads: tuple[str, ...],
    force: bool, dry_run: bool, run_dir: Path | None, as_json: bool, drafts: tuple[str, ...] = (),
) -> None:
    """`--speed-only` (or a draft's job): plan, then show the plan or measure, print, exit by the speed verdict."""
    from hfrelease.cli.output import print_json

    plan = _plan_speed(loaded, ledger=ledger, cache=cache, artifacts=artifacts, workloads=workloads, force=force,
                       dry_run=dry_run, drafts=drafts)
    if dry_run:
        _print_speed_plan(plan, as_json=as_json)
        return
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    from hfrelease.speed.runner import SpeedSession

    directory = run_dir or Path("runs") / f"{loaded.family.name}-{stamp}"
    report = _run_speed_live(SpeedSession(plan, ledger=ledger, run_dir=directory))
    if as_json:
        print_json({"speed": report.as_dict(), "exit_code": int(report.exit_code)})
    else:
        _print_speed_report(report)
    click.get_current_context().exit(int(report.exit_code))


def _captured_json(show: Callable[[], None]) -> dict[str, Any]:
    """What a gate printer writes as JSON, as a value (to nest it beside the speed section)."""
    import contextlib
    import io
    import json

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        show()
    data = json.loads(buffer.getvalue())
    return data if isinstance(data, dict) else {"value": data}


def _print_with_speed(
    show_gates: Callable[[], None], loaded: Manifest, *, ledger: Ledger, cache: HashCache,
    artifacts: tuple[str, ...], workloads: tuple[str, ...], force: bool, as_json: bool, gate_servers: set[str],
    drafts: tuple[str, ...] = (),
) -> None:
    """`--speed --dry-run`: the gate plan, then the speed plan (one JSON document with --json).

    `gate_servers`: artifacts whose gate server starts anyway; their no-speculation points run on it.
    """
    from hfrelease.cli.output import print_json

    plan = _plan_speed(loaded, ledger=ledger, cache=cache, artifacts=artifacts, workloads=workloads, force=force,
                       dry_run=True, drafts=drafts)
    if as_json:
        print_json({**_captured_json(show_gates), "speed": _speed_plan_dict(plan, gate_servers)})
        return
    show_gates()
    _print_speed_plan(plan, as_json=False, gate_servers=gate_servers)


def _run_with_speed(show_gates: Callable[[], None], gate_code: int, session: SpeedSession, *, as_json: bool) -> int:
    """`--speed`: after the gates (whose servers measured their no-speculation points), the rest of the
    speed anchors; print both; return the combined exit status."""
    from hfrelease.cli.output import print_json

    report = _run_speed_live(session)
    code = _worst(int(gate_code), int(report.exit_code))
    if as_json:
        print_json({**_captured_json(show_gates), "speed": report.as_dict(), "exit_code": code})
    else:
        show_gates()
        _print_speed_report(report)
    return code


def _speed_plan_dict(plan: SpeedPlan, gate_servers: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    from hfrelease.speed import bench
    from hfrelease.speed.runner import point_steps, serve_command

    servers: list[dict[str, Any]] = []
    for job in plan.servers:
        # The runner's own command builders, with placeholders for what only exists at run time.
        base = "http://127.0.0.1:<port>"
        points = []
        for point in job.points:
            steps = point_steps(plan, job, point, base_url=base, run_dir=Path("<run dir>"))
            points.append({"workload": point.workload.id, "concurrency": point.concurrency,
                           "repeats": point.workload.repeats, "warmups": point.workload.warmups,
                           "cached": not point.pending, "input_key": point.input_key or None,
                           "commands": [bench.display(step.argv) for step in steps]})
        command = serve_command(plan, job, port=0)
        servers.append({"artifact": job.artifact.id, "speculative": job.spec_id,
                        "draft": job.draft.id if job.draft else None, "serve": _display_with_port(command),
                        "argv": _port_placeholder(command.argv), "plugin": job.public.plugin, "points": points,
                        "unknown": job.unknown,
                        "on_gate_server": job.speculative is None and job.artifact.id in gate_servers})
    return {"family": plan.manifest.family.name, "pending": plan.pending, "servers": servers}


def _print_speed_plan(plan: SpeedPlan, *, as_json: bool, gate_servers: set[str] | frozenset[str] = frozenset()) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import out_console, print_json

    data = _speed_plan_dict(plan, gate_servers)
    if as_json:
        print_json({"speed": data})
        return
    for server in data["servers"]:
        pending = [p for p in server["points"] if not p["cached"]]
        out_console.print(f"[bold]speed: {server['artifact']} {escape('[' + server['speculative'] + ']')}[/] — "
                          f"{len(pending)} of {len(server['points'])} points to measure")
        if server["unknown"]:
            _print_unknown(server["unknown"])
        if server["plugin"] and pending:
            out_console.print(f"  pip install --no-deps --no-build-isolation {server['plugin']}", soft_wrap=True,
                              markup=False)
        if pending and server["on_gate_server"]:
            out_console.print(f"  (on the gate server of {server['artifact']}, after its gates: the same command)",
                              markup=False)
        out_console.print(f"  {server['serve']}" if pending else "  (no server: every point is recorded)",
                          soft_wrap=True, markup=False)
        for point in server["points"]:
            mark = "recorded" if point["cached"] else "run"
            out_console.print(f"    [{mark}] {point['workload']} c{point['concurrency']} "
                              f"(warm-up: {point['warmups']} requests + every prompt once; {point['repeats']} repeats)",
                              markup=False)
            if not point["cached"]:
                for command in point["commands"]:
                    out_console.print(f"      {command}", soft_wrap=True, markup=False)


class _SpeedView:
    """The live view of the speed anchors: per server its state, per point its progress."""

    def __init__(self, plan: SpeedPlan) -> None:
        self.started = time.monotonic()
        self.states: dict[str, str] = {job.label: "waiting" for job in plan.servers}
        self.points: dict[tuple[str, str], str] = {
            (job.label, p.label): ("recorded" if not p.pending else "pending")
            for job in plan.servers for p in job.points
        }
        self.lines: list[str] = []

    def server_state(self, server_id: str, state: str) -> None:
        self.states[server_id] = state

    def point_progress(self, server_id: str, point_id: str, text: str) -> None:
        self.points[(server_id, point_id)] = text

    def log(self, message: str) -> None:
        from hfrelease.redact import redact

        self.lines = [*self.lines[-3:], redact(message)]

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.markup import escape
        from rich.text import Text

        from hfrelease.cli.output import make_table

        table = make_table("server", "state", "point", "progress",
                           title=f"hfrelease eval --speed — {time.monotonic() - self.started:.0f} s")
        for server_id, state in self.states.items():
            first = True
            for (sid, point_id), progress in self.points.items():
                if sid != server_id:
                    continue
                table.add_row(escape(server_id) if first else "", escape(state) if first else "", escape(point_id),
                              escape(progress))
                first = False
        return Group(table, *(Text(line, style="dim", overflow="ellipsis", no_wrap=True) for line in self.lines))


def _run_speed_live(session: SpeedSession) -> SpeedReport:
    """Run what is left of `session` under a live view and return its report."""
    from rich.console import Console
    from rich.live import Live

    from hfrelease.cli.output import err_console

    plan, run_dir = session.plan, session.run_dir

    # As for the gates: the benchmark's own output is sent to the run's log by redirecting descriptors
    # 1 and 2, so the view draws on its own copy of the terminal's stderr.
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    live_console = Console(file=terminal, highlight=False, width=err_console.width if not terminal.isatty() else None)
    view = _SpeedView(plan)

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    _ci_fold("eval --speed: servers and benchmarks")
    try:
        with Live(get_renderable=view.render, console=live_console, refresh_per_second=4,
                  transient=False, redirect_stdout=False, redirect_stderr=False):
            session.events = view
            session.run_remaining()
            report = session.report()
        _ci_summary(speed=report)
        return report
    finally:
        signal.signal(signal.SIGTERM, previous)
        terminal.close()
        err_console.print(f"[dim]speed logs: {run_dir}[/]")
        _ci_fold(None)


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
            _add_speed_row(table, row, first=row.workload_id)
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


# -- GitHub Actions (`hfrelease.ci`): the live view folded in the job log, the tables in the step summary ----------

def _ci_fold(title: str | None) -> None:
    """Open a fold titled `title` (None closes it) when running on GitHub Actions."""
    from hfrelease.ci import CiEnvironment, group_end, group_start

    if CiEnvironment.detect().github_actions:
        click.echo(group_start(title) if title is not None else group_end(), err=True)


def _ci_summary(*, gates: EvalReport | None = None, speed: SpeedReport | None = None) -> None:
    """Append the gate or speed table to the step summary when running on GitHub Actions."""
    from hfrelease.ci import CiEnvironment, append_summary, gate_summary, speed_summary

    ci = CiEnvironment.detect()
    if not ci.github_actions or ci.step_summary is None:
        return
    if gates is not None:
        append_summary(ci.step_summary, gate_summary(gates.rows))
    if speed is not None:
        append_summary(ci.step_summary, speed_summary(speed))
