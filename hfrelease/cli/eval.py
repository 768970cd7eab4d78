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

if TYPE_CHECKING:
    from rich.console import RenderableType

    from hfrelease.evaluation.plan import EvalPlan
    from hfrelease.evaluation.runner import EvalReport


def cache_dir() -> Path:
    return Path(os.environ.get("HFRELEASE_CACHE") or Path.home() / ".cache" / "hfrelease")


@click.command("eval")
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--artifact", "artifacts", multiple=True, help="Evaluate only this artifact id (repeatable).")
@click.option("--gate", "gates", multiple=True, help="Run only this gate id (repeatable).")
@click.option("--endpoint", help="Attach to a running vLLM server (its base URL) instead of starting one.")
@click.option("--force", is_flag=True, help="Re-measure even when a matching result is recorded.")
@click.option("--dry-run", is_flag=True, help="Print every vllm serve and lm-eval invocation; start nothing.")
@click.option("--speed", is_flag=True, help="Also run the speed anchors (workloads); lands with the speed issue.")
@click.option("--run-dir", type=click.Path(path_type=Path), help="Where server and lm-eval logs go (default: runs/).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
def eval_(
    manifest: Path, artifacts: tuple[str, ...], gates: tuple[str, ...], endpoint: str | None,
    force: bool, dry_run: bool, speed: bool, run_dir: Path | None, as_json: bool,
) -> None:
    """Serve every artifact with vLLM, run its gates, record results in the ledger, gate against the reference.

    Each artifact's server starts once and all its gates use it; a gate already recorded for the same
    inputs (artifact hash, task, settings, harness versions) is not re-run. Exit 4 when a gate fails,
    5 when a server dies, 6 when a measurement is void (e.g. answers cut off by the budget).
    """
    from hfrelease.errors import NotBuiltError
    from hfrelease.evaluation.plan import plan_eval
    from hfrelease.ledger.hashing import HashCache
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest

    if speed:
        raise NotBuiltError("eval --speed", "speed-anchor issue")
    loaded = load_manifest(manifest)
    if endpoint is not None and len(artifacts) != 1:
        raise click.UsageError("--endpoint attaches to one server: name its artifact with --artifact ID")
    ledger = Ledger(loaded.root / "results")
    cache = HashCache(cache_dir() / "hashes.json")
    plan = plan_eval(loaded, ledger=ledger, hash_cache=cache, artifacts=artifacts, gates=gates, force=force,
                     download=not dry_run)
    cache.save()
    if dry_run:
        _print_plan(plan, as_json=as_json)
        return
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    directory = run_dir or Path("runs") / f"{loaded.family.name}-{stamp}"
    report = _run_live(plan, ledger=ledger, run_dir=directory, cache=cache, endpoint=endpoint, as_json=as_json)
    cache.save()
    _print_report(report, as_json=as_json, hash_bytes_read=cache.bytes_read)
    click.get_current_context().exit(int(report.exit_code))


def _print_plan(plan: EvalPlan, *, as_json: bool) -> None:
    from hfrelease.cli.output import out_console, print_json
    from hfrelease.evaluation.plan import describe_gate
    from hfrelease.serving.command import build_serve_command

    servers: list[dict[str, Any]] = []
    for job in plan.servers:
        model = str(job.model_dir) if job.model_dir else job.artifact.repo
        command = build_serve_command(plan.manifest, job.artifact, model=model, host="127.0.0.1", port=0)
        argv = [("<port>" if a == "0" and i and command.argv[i - 1] == "--port" else a)
                for i, a in enumerate(command.argv)]
        run = command.display().replace("--port 0", "--port <port>")
        base = "http://127.0.0.1:<port>"
        tokenizer = str(job.model_dir) if job.model_dir else None
        servers.append({
            "artifact": job.artifact.id,
            "serve": run,
            "argv": argv,
            "plugin": command.plugin,
            "gates": [
                {"gate": g.gate.id, "cached": not g.pending, "input_key": g.input_key or None,
                 "command": describe_gate(plan.manifest, g, base_url=base, model=job.artifact.repo,
                                          tokenizer=tokenizer if g.gate.api == "completions" else None)}
                for g in job.gates
            ],
        })
    if as_json:
        print_json({"family": plan.manifest.family.name, "pending": plan.pending, "servers": servers})
        return
    for server in servers:
        pending = [g for g in server["gates"] if not g["cached"]]
        out_console.print(f"[bold]{server['artifact']}[/] — {len(pending)} of {len(server['gates'])} gates to run")
        if server["plugin"]:
            out_console.print(f"  pip install --no-deps --no-build-isolation {server['plugin']}", soft_wrap=True)
        out_console.print(f"  {server['serve']}" if pending else "  (no server: every gate is recorded)",
                          soft_wrap=True, markup=False)
        for gate in server["gates"]:
            mark = "recorded" if gate["cached"] else "run"
            out_console.print(f"    [{mark}] {gate['gate']}: {gate['command']}", soft_wrap=True, markup=False)


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


def _run_live(
    plan: EvalPlan, *, ledger: Any, run_dir: Path, cache: Any, endpoint: str | None, as_json: bool
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
    try:
        with Live(get_renderable=view.render, console=live_console, refresh_per_second=4,
                  transient=False, redirect_stdout=False, redirect_stderr=False):
            return run_eval(plan, ledger=ledger, run_dir=run_dir, hash_cache=cache, endpoint=endpoint, events=view)
    finally:
        signal.signal(signal.SIGTERM, previous)
        terminal.close()
        err_console.print(f"[dim]logs: {run_dir}[/]")


def _print_report(report: EvalReport, *, as_json: bool, hash_bytes_read: int) -> None:
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
            verdict += f": {row.reason}"
        table.add_row(row.artifact_id, row.label, row.mode, value, delta, str(row.n),
                      f"{row.truncated}/{row.empty}", verdict)
    out_console.print(table)
    out_console.print(
        f"{report.servers_started} server(s) started, {report.requests_sent} requests sent; "
        f"records in the ledger; logs in {report.run_dir}"
    )
