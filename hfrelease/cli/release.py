"""`hfrelease release`: the release job graph on this machine, or one job of it in a workflow (`--only`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

    from hfrelease.ledger.hashing import HashCache
    from hfrelease.manifest import Manifest
    from hfrelease.rehearsal import JobResult, RehearsalReport

_ONLY = ("check", "gate", "publish")


@click.command()
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--hub", default="local", show_default=True,
              help="Hub endpoint URL, `local` for the built-in Hub, or `manifest` for [publish].endpoint.")
@click.option("--tag", help="The git tag being released; must equal the manifest's release tag (else exit 3).")
@click.option("--work", "work_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Where the jobs' directories, the local Hub and the verified downloads go "
                   "(default: <family>/.hfrelease/release).")
@click.option("--artifact", "artifacts", multiple=True, help="Only this artifact id (repeatable).")
@click.option("--gate", "gates", multiple=True, help="Only this gate id (repeatable).")
@click.option("--hub-root", type=click.Path(path_type=Path),
              help="State directory of `--hub local` (default: WORK/hub).")
@click.option("--only", type=click.Choice(_ONLY),
              help="Run one step of the workflow: `check` (tag; the eval matrix to GITHUB_OUTPUT), `gate` (judge the "
                   "merged ledger), `publish` (publish, never a dry run, then verify).")
def release(
    manifest: Path, hub: str, tag: str | None, work_dir: Path | None, artifacts: tuple[str, ...],
    gates: tuple[str, ...], hub_root: Path | None, only: str | None,
) -> None:
    """Run the release job graph on this machine: check, eval per artifact, merge, render, publish, verify.

    \b
    The jobs of .github/workflows/release.yml, under the same names: each eval job works in its own
    directory on its own copy of the ledger, the copies are merged, every gate is judged on the merged
    ledger, and a gate problem of a published artifact stops the release before anything is uploaded
    (an artifact with `publish = false` may fail). The family directory is worked on in place.
    On GitHub Actions each job is folded in the log; the step summary goes to GITHUB_STEP_SUMMARY.
    """
    from hfrelease.cli.eval import cache_dir
    from hfrelease.ledger.hashing import HashCache
    from hfrelease.manifest import load_manifest
    from hfrelease.release_policy import check_tag

    cache = HashCache(cache_dir() / "hashes.json")
    if only is None:
        _rehearse(manifest, hub=hub, tag=tag, work_dir=work_dir, artifacts=artifacts, gates=gates, hub_root=hub_root,
                  cache=cache)
        return
    loaded = load_manifest(manifest)
    check_tag(loaded, tag)
    if only == "check":
        _only_check(loaded, artifacts=artifacts, gates=gates)
    elif only == "gate":
        _only_gate(loaded, artifacts=artifacts, gates=gates, cache=cache)
    else:
        _only_publish(loaded, hub=hub, hub_root=hub_root, artifacts=artifacts, work_dir=work_dir, cache=cache)
    cache.save()


def _terminal() -> Console:
    from rich.console import Console

    from hfrelease.cli.output import err_console

    # lm-eval's output is sent to the run's log by redirecting descriptor 2 (see runner.stderr_to); the
    # progress of the jobs goes to a copy of the terminal's stderr so it stays on screen.
    stream = os.fdopen(os.dup(2), "w", buffering=1)
    return Console(file=stream, highlight=False, width=err_console.width if not stream.isatty() else None)


class _Display:
    """Prints each job's start, log lines and conclusion; on GitHub Actions each job is one fold."""

    def __init__(self, console: Console, *, folds: bool) -> None:
        self.console = console
        self.folds = folds

    def job_started(self, name: str) -> None:
        from hfrelease.ci import group_start

        if self.folds:
            self.console.print(group_start(f"job: {name}"), markup=False, highlight=False, soft_wrap=True)
        else:
            self.console.print(f"[bold cyan]==> {name}[/]")

    def job_finished(self, job: JobResult) -> None:
        from rich.markup import escape

        from hfrelease.ci import group_end

        colour = {"success": "green", "failure": "red", "skipped": "dim"}[job.status]
        if self.folds and job.status != "skipped":
            self.console.print(group_end(), markup=False, highlight=False)
        self.console.print(f"[{colour}]{job.status}[/] {escape(job.name)} ({job.seconds:.0f} s) {escape(job.detail)}",
                           soft_wrap=True)

    def log(self, message: str) -> None:
        from hfrelease.redact import redact

        self.console.print(f"  {redact(message)}", markup=False, highlight=False, soft_wrap=True)


def _rehearse(
    manifest: Path, *, hub: str, tag: str | None, work_dir: Path | None, artifacts: tuple[str, ...],
    gates: tuple[str, ...], hub_root: Path | None, cache: HashCache,
) -> None:
    from hfrelease.ci import CiEnvironment
    from hfrelease.manifest import find_manifest
    from hfrelease.rehearsal import rehearse

    ci = CiEnvironment.detect()
    directory = work_dir or find_manifest(manifest).parent / ".hfrelease" / "release"
    console = _terminal()
    try:
        report = rehearse(manifest, work_dir=directory, hub=hub, tag=tag, artifacts=artifacts, gates=gates,
                          hub_root=hub_root, hash_cache=cache, events=_Display(console, folds=ci.github_actions))
    finally:
        cache.save()
        console.file.close()
    _print_report(report)
    if report.error is not None:
        raise report.error


def _print_report(report: RehearsalReport) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import err_console, make_table, out_console

    table = make_table("job", "conclusion", "time", "detail",
                       title=f"release {report.family} {report.tag} -> {report.hub} (work: {report.work_dir})")
    for job in report.jobs:
        table.add_row(escape(job.name), job.status, f"{job.seconds:.0f} s", escape(job.detail))
    out_console.print(table)
    for problem in report.allowed:
        err_console.print(f"[yellow]allowed (publish = false):[/] {escape(problem)}", soft_wrap=True)
    if report.error is None:
        err_console.print(f"[bold green]released {report.family} {report.tag}[/]; verified "
                          f"{len(report.verified)} repo(s)")


def _only_check(loaded: Manifest, *, artifacts: tuple[str, ...], gates: tuple[str, ...]) -> None:
    from hfrelease.ci import CiEnvironment, append_summary, markdown_table, set_output
    from hfrelease.cli.output import err_console, print_json
    from hfrelease.errors import ConfigError, ConfigProblem
    from hfrelease.release_policy import eval_matrix

    entries = eval_matrix(loaded, artifacts, gates)
    if not entries:
        raise ConfigError("hfrelease release", [ConfigProblem(
            location="gate", message="no artifact has a gate to run: the eval matrix would be empty")])
    matrix = {"include": [e.as_dict() for e in entries]}
    ci = CiEnvironment.detect()
    if ci.output is not None:
        set_output(ci.output, "matrix", json.dumps(matrix))
    if ci.step_summary is not None:
        append_summary(ci.step_summary, f"### Release {loaded.family.name} {loaded.tag_name()}: eval matrix\n\n"
                       + markdown_table(("artifact", "published"), [(e.artifact, e.publish) for e in entries]))
    err_console.print(f"[green]✓[/] tag {loaded.tag_name()} is {loaded.family.name}'s release; "
                      f"eval matrix: {', '.join(e.artifact for e in entries)}")
    print_json(matrix)


def _only_gate(loaded: Manifest, *, artifacts: tuple[str, ...], gates: tuple[str, ...], cache: HashCache) -> None:
    from rich.markup import escape

    from hfrelease.ci import CiEnvironment, append_summary, gate_summary
    from hfrelease.cli.output import err_console
    from hfrelease.ledger.store import Ledger
    from hfrelease.release_policy import decide_gates

    decision = decide_gates(loaded, ledger=Ledger(loaded.root / "results"), hash_cache=cache, artifacts=artifacts,
                            gates=gates)
    ci = CiEnvironment.detect()
    if ci.step_summary is not None:
        allowed = "".join(f"\n- allowed (publish = false): {p.text}" for p in decision.allowed)
        append_summary(ci.step_summary, gate_summary(decision.rows, title="Gates after the merge") + "\n" + allowed)
    for problem in decision.allowed:
        err_console.print(f"[yellow]allowed (publish = false):[/] {escape(problem.text)}", soft_wrap=True)
    error = decision.error()
    if error is not None:
        raise error
    err_console.print(f"[green]✓[/] {len(decision.rows)} gate result(s): every published artifact passes")


def _only_publish(
    loaded: Manifest, *, hub: str, hub_root: Path | None, artifacts: tuple[str, ...], work_dir: Path | None,
    cache: HashCache,
) -> None:
    import tempfile

    from hfrelease.ci import CiEnvironment, append_summary, markdown_table
    from hfrelease.cli.output import err_console
    from hfrelease.rehearsal import publish_and_verify

    out_dir = (work_dir or Path(tempfile.mkdtemp(prefix="hfrelease-verify-"))) / "verify"
    report, verified = publish_and_verify(
        loaded, hub=hub, hub_root=hub_root, artifacts=artifacts, out_dir=out_dir, cache=cache,
        echo=lambda line: err_console.print(f"[dim]{line}[/]", soft_wrap=True, highlight=False))
    outcome = report.outcome
    assert outcome is not None  # publish_and_verify never dry-runs
    ci = CiEnvironment.detect()
    if ci.step_summary is not None:
        append_summary(ci.step_summary, f"### Published {loaded.family.name} {outcome.tag}: {outcome.message}\n\n"
                       + markdown_table(("repo", "status", "commit"),
                                        [(o.repo, o.status, (o.commit or "")[:12]) for o in outcome.repos]))
    err_console.print(f"[bold green]{outcome.message}[/]; {len(verified)} repo(s) downloaded back and verified",
                      soft_wrap=True)
