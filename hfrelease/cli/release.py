"""`hfrelease release`: the release workflow rehearsed on this machine, or one step of it (`--only`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from hfrelease.actions.runner import JobResult, StepResult
    from hfrelease.release.rehearsal import RehearsalReport
    from hfrelease.stages.release import StepSettings

_ONLY = ("check", "gate", "publish")


@click.command()
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--hub", default="local", show_default=True,
              help="`local` for the built-in Hub (started for the rehearsal), a Hub URL, or `manifest` for "
                   "[publish].endpoint (HF_ENDPOINT, when set, overrides it as it does for huggingface_hub).")
@click.option("--tag", help="The git tag being released; must equal the manifest's release tag (else exit 3).")
@click.option("--work", "work_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Where the jobs' workspaces, the artifacts, the logs and the local Hub go "
                   "(default: <family>/.hfrelease/release).")
@click.option("--artifact", "artifacts", multiple=True, help="With --only: only this artifact id (repeatable).")
@click.option("--gate", "gates", multiple=True, help="With --only: only this gate id (repeatable).")
@click.option("--hub-root", type=click.Path(path_type=Path, file_okay=False),
              help="State directory of `--hub local` (default: WORK/hub).")
@click.option("--workflow", "workflow_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The workflow to run (default: the nearest .github/workflows/release.yml above the manifest).")
@click.option("--write-workflow", is_flag=True,
              help="Write the family's .github/workflows/release.yml under --root (as `init --github` does); exit.")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False),
              help="With --write-workflow: the repository root (default: the manifest's git checkout).")
@click.option("--force", is_flag=True, help="With --write-workflow: overwrite a different release.yml.")
@click.option("--only", type=click.Choice(_ONLY),
              help="Run one step of the workflow: `check` (tag; the eval matrix to GITHUB_OUTPUT), `gate` (judge the "
                   "merged ledger), `publish` (publish, never a dry run, then verify).")
@click.option("--from-bundle", "from_bundle", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="With --only publish: publish the bundle `hfrelease bundle --out DIR` wrote in another job, each "
                   "file checked against its MANIFEST first; nothing is built here.")
@click.option("--attestation", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="With --from-bundle: a Sigstore bundle attesting the MANIFESTs, shipped beside each as "
                   "MANIFEST.sigstore.json (`hfrelease verify` checks it).")
def release(
    manifest: Path, hub: str, tag: str | None, work_dir: Path | None, artifacts: tuple[str, ...],
    gates: tuple[str, ...], hub_root: Path | None, workflow_file: Path | None, write_workflow: bool,
    root: Path | None, force: bool, only: str | None, from_bundle: Path | None = None,
    attestation: Path | None = None,
) -> None:
    """Rehearse the release: run the family's release workflow file on this machine, job by job.

    \b
    Each job of .github/workflows/release.yml runs in a fresh directory holding a copy of the work tree
    (for actions/checkout); its `run:` steps run as written, through this CLI, as subprocesses; `needs`,
    `if:`, the matrix from the check job's output and fail-fast as on GitHub; artifacts pass between
    jobs only through upload-artifact/download-artifact, with their semantics (hidden files left out
    unless include-hidden-files). setup-python and pip installs are substituted by this environment,
    and each job's report says so. The jobs see the Hub as a runner does: HF_ENDPOINT, secrets.HF_TOKEN.
    """
    from hfrelease.manifest import load_manifest
    from hfrelease.stages.release import StepSettings

    if write_workflow:
        _write_workflow(manifest, root=root, force=force)
        return
    if only is None:
        if artifacts or gates:
            raise click.UsageError("--artifact and --gate apply with --only: the rehearsal runs the workflow as "
                                   "written (cut the manifest down instead)")
        _rehearse(manifest, hub=hub, tag=tag, work_dir=work_dir, hub_root=hub_root, workflow_file=workflow_file)
        return
    if (from_bundle is not None or attestation is not None) and only != "publish":
        raise click.UsageError("--from-bundle and --attestation apply with --only publish")
    if attestation is not None and from_bundle is None:
        raise click.UsageError("--attestation needs --from-bundle (it signs the MANIFESTs of that bundle)")
    # Publishing a bundle made elsewhere needs no source file here (the publish job's runner has no weights).
    settings = StepSettings(manifest=load_manifest(manifest, check_files=from_bundle is None), tag=tag,
                            artifacts=artifacts, gates=gates, hub=hub, hub_root=hub_root, work_dir=work_dir,
                            from_bundle=from_bundle, attestation=attestation)
    {"check": _only_check, "gate": _only_gate, "publish": _only_publish}[only](settings)


def _write_workflow(manifest: Path, *, root: Path | None, force: bool) -> None:
    from hfrelease.cli.output import err_console
    from hfrelease.manifest import find_manifest
    from hfrelease.release.rehearsal import write_release_workflow
    from hfrelease.release.workflows import repository_root

    manifest_file = find_manifest(manifest)
    path = write_release_workflow(manifest_file, root=root or repository_root(manifest_file.parent), force=force)
    err_console.print(f"[green]wrote[/] {path}", soft_wrap=True)


class _Display:
    """Prints each job's start, its steps' output and conclusions; on GitHub Actions each job is one fold."""

    def __init__(self, *, folds: bool) -> None:
        from hfrelease.cli.output import err_console

        self.console = err_console
        self.folds = folds
        self.open = False

    def job_started(self, name: str) -> None:
        from hfrelease.release.ci import group_start

        self.open = True
        if self.folds:
            self.console.print(group_start(f"job: {name}"), markup=False, highlight=False, soft_wrap=True)
        else:
            self.console.print(f"[bold cyan]==> {name}[/]")

    def step_finished(self, job: str, step: StepResult) -> None:
        from rich.markup import escape

        colour = {"success": "green", "failure": "red", "skipped": "dim", "cancelled": "yellow"}[step.status]
        what = f" (substituted: {escape(step.substituted)})" if step.substituted else ""
        detail = f": {escape(step.detail)}" if step.detail and step.status != "success" else ""
        self.console.print(f"  [{colour}]{step.status}[/] {escape(step.label)}{what}{detail}", soft_wrap=True)

    def log(self, job: str, line: str) -> None:
        from hfrelease.redact import redact

        self.console.print(f"    {redact(line)}", markup=False, highlight=False, soft_wrap=True)

    def job_finished(self, job: JobResult) -> None:
        from rich.markup import escape

        from hfrelease.release.ci import group_end

        colour = {"success": "green", "failure": "red", "skipped": "dim", "cancelled": "yellow"}[job.status]
        if self.folds and self.open:
            self.console.print(group_end(), markup=False, highlight=False)
        self.open = False
        self.console.print(f"[{colour}]{job.status}[/] {escape(job.name)} ({job.seconds:.0f} s) {escape(job.detail)}",
                           soft_wrap=True)


def _rehearse(
    manifest: Path, *, hub: str, tag: str | None, work_dir: Path | None, hub_root: Path | None,
    workflow_file: Path | None,
) -> None:
    from hfrelease.manifest import find_manifest
    from hfrelease.release.ci import CiEnvironment
    from hfrelease.release.rehearsal import rehearse

    ci = CiEnvironment.detect()
    directory = work_dir or find_manifest(manifest).parent / ".hfrelease" / "release"
    report = rehearse(manifest, work_dir=directory, hub=hub, tag=tag, hub_root=hub_root, workflow_file=workflow_file,
                      events=_Display(folds=ci.github_actions))
    _print_report(report)
    if report.error is not None:
        raise report.error


def _print_report(report: RehearsalReport) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import err_console, make_table, out_console

    table = make_table("job", "conclusion", "time", "detail",
                       title=f"release {report.family} {report.tag}: {report.workflow} (Hub {report.hub}, "
                             f"work {report.work_dir})")
    for job in report.jobs:
        table.add_row(escape(job.name), job.status, f"{job.seconds:.0f} s", escape(job.detail))
    out_console.print(table)
    for job in report.jobs:
        for what in job.substitutions():
            err_console.print(f"[yellow]substituted[/] in {escape(job.name)}: {escape(what)}", soft_wrap=True)
    if report.error is None:
        err_console.print(f"[bold green]the release workflow of {report.family} {report.tag} succeeded[/]")


def _only_check(settings: StepSettings) -> None:
    from hfrelease.cli.output import err_console, print_json
    from hfrelease.stages.release import check_step

    report = check_step(settings)
    loaded = settings.manifest
    err_console.print(f"[green]✓[/] tag {loaded.tag_name()} is {loaded.family.name}'s release; "
                      f"eval matrix: {', '.join(e.artifact for e in report.entries)}")
    print_json(report.as_dict())


def _only_gate(settings: StepSettings) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import err_console
    from hfrelease.stages.release import gate_step

    decision = gate_step(settings)
    for problem in decision.allowed:
        err_console.print(f"[yellow]allowed (publish = false):[/] {escape(problem.text)}", soft_wrap=True)
    error = decision.error()
    if error is not None:
        raise error
    drafts = f" and {len(decision.draft_checks)} draft-gate check(s)" if decision.draft_checks else ""
    err_console.print(f"[green]✓[/] {len(decision.rows)} gate result(s){drafts}: every published artifact passes")


def _only_publish(settings: StepSettings) -> None:
    from hfrelease.cli.output import err_console
    from hfrelease.stages.release import publish_step

    report, verified = publish_step(
        settings, echo=lambda line: err_console.print(f"[dim]{line}[/]", soft_wrap=True, highlight=False))
    assert report.outcome is not None  # the publish step never dry-runs
    err_console.print(f"[bold green]{report.outcome.message}[/]; {len(verified)} repo(s) downloaded back and "
                      "verified", soft_wrap=True)
