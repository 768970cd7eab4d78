"""`hfrelease eval`: parse options, call the eval stage (`hfrelease.stages.eval`) under a live view, print
its report, exit by it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hfrelease.cli import options

if TYPE_CHECKING:
    from hfrelease.stages.eval_view import LiveProgress


@click.command("eval")
@options.MANIFEST
@options.artifacts("Evaluate only")
@click.option("--gate", "gates", multiple=True, help="Run only this gate id (repeatable).")
@click.option("--endpoint", help="Attach to a running vLLM server (its base URL) instead of starting one.")
@click.option("--force", is_flag=True, help="Re-measure even when a matching result is recorded.")
@click.option("--dry-run", is_flag=True,
              help="Print every vllm serve, lm_eval and (--speed) vllm bench serve command as run; start nothing.")
@click.option("--speed", is_flag=True, help="Also run the speed anchors (workloads x speculative configs).")
@click.option("--speed-only", is_flag=True, help="Run only the speed anchors, no gates (implies --speed).")
@click.option("--leave-drafts", is_flag=True,
              help="With --speed: leave configs served with a draft artifact to that draft's own job "
                   "(--artifact DRAFT), as the release workflow's eval jobs do.")
@click.option("--workload", "workloads", multiple=True, help="Speed anchors: only this workload id (repeatable).")
@click.option("--run-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Where server and lm-eval logs go (default: runs/).")
@options.as_json("the results")
@options.json_on_error
def eval_(
    manifest: Path, artifacts: tuple[str, ...], gates: tuple[str, ...], endpoint: str | None,
    force: bool, dry_run: bool, speed: bool, run_dir: Path | None, as_json: bool,
    speed_only: bool = False, workloads: tuple[str, ...] = (), leave_drafts: bool = False,
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
    judges its draft gates, with --speed --leave-drafts too (the release workflow's eval jobs' command).
    """
    from hfrelease.cli.output import print_json, show
    from hfrelease.stages.eval import EvalSettings, plan_eval_stage, run_eval_stage
    from hfrelease.stages.eval_view import LiveViews, plan_view, stage_view
    from hfrelease.stages.runner import exit_status

    settings = EvalSettings(manifest=manifest, artifacts=artifacts, gates=gates, workloads=workloads,
                            endpoint=endpoint, force=force, speed=speed, speed_only=speed_only, run_dir=run_dir,
                            leave_drafts=leave_drafts)
    if dry_run:
        plan = plan_eval_stage(settings)
        print_json(plan.as_dict()) if as_json else show(plan_view(plan))
        return
    report = run_eval_stage(settings, views=LiveViews(_live))
    print_json(report.as_dict()) if as_json else show(stage_view(report))
    click.get_current_context().exit(exit_status(report))


# -- the live view ------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _live(progress: LiveProgress, *, fold: str, logs: str) -> Iterator[None]:
    """`progress` drawn live while the block runs, in a GitHub Actions fold; then where the logs are (dimmed)."""
    from hfrelease.ci.github import folded
    from hfrelease.cli.output import echo, live

    with folded(fold, lambda text: click.echo(text, err=True)):
        try:
            with live(progress.view):  # on its own copy of the terminal's stderr (`output.live`)
                yield
        finally:
            echo(logs)
