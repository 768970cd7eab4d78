"""`hfrelease release`: the release workflow rehearsed on this machine, or one step of it (`--only`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from hfrelease.cli import options
from hfrelease.stages.release import STEPS

if TYPE_CHECKING:
    from hfrelease.stages.release import Step, StepSettings


@click.command()
@options.MANIFEST
@click.option("--hub", default="local", show_default=True,
              help="`local` for the built-in Hub (started for the rehearsal), a Hub URL, or `manifest` for "
                   "[publish].endpoint (HF_ENDPOINT, when set, overrides it as it does for huggingface_hub).")
@click.option("--tag", help="The git tag being released; must equal the manifest's release tag (else exit 3).")
@click.option("--work", "work_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Where the jobs' workspaces, the artifacts, the logs and the local Hub go "
                   "(default: <family>/.hfrelease/release).")
@options.artifacts("With --only: only")
@click.option("--gate", "gates", multiple=True, help="With --only: only this gate id (repeatable).")
@options.hub_root("WORK/hub")
@click.option("--workflow", "workflow_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The workflow to run (default: the nearest .github/workflows/release.yml above the manifest).")
@click.option("--trusted", is_flag=True, help="With --hub local: publish by trusted publishing (the built-in Hub's "
              "OIDC exchange), no secrets.HF_TOKEN; jobs granted id-token: write can mint an id token.")
@click.option("--write-workflow", is_flag=True,
              help="Write the family's .github/workflows/release.yml under --root (as `init --github` does); exit.")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False),
              help="With --write-workflow: the repository root (default: the manifest's git checkout).")
@click.option("--force", is_flag=True, help="With --write-workflow: overwrite a different release.yml.")
@click.option("--only", type=click.Choice(STEPS),
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
    root: Path | None, force: bool, only: Step | None, from_bundle: Path | None = None,
    attestation: Path | None = None, trusted: bool = False,
) -> None:
    """Rehearse the release: run the family's release workflow file on this machine, job by job.

    \b
    Each job of .github/workflows/release.yml runs as on GitHub, on the committed tree (HEAD), in a fresh
    directory, with a runner's environment plus the workflow's env and secrets; setup-python and installs are
    substituted (each job's report says how). The README lists what the rehearsal models and what not.
    """
    from hfrelease.cli.output import show
    from hfrelease.stages.release import ReleaseSettings, rehearse_stage
    from hfrelease.stages.release_view import rehearsal_view

    if write_workflow:
        from hfrelease.ci.rehearsal import write_release_workflow
        from hfrelease.stages.view import Styled, line

        show([line(Styled("wrote", "green"), f" {write_release_workflow(manifest, root=root, force=force)}", err=True)])
        return
    settings = ReleaseSettings(manifest=manifest, step=only, hub=hub, tag=tag, work_dir=work_dir, artifacts=artifacts,
                               gates=gates, hub_root=hub_root, workflow_file=workflow_file, from_bundle=from_bundle,
                               attestation=attestation, trusted=trusted)
    if only is not None:
        _only(only, settings.step_settings())
        return
    report = rehearse_stage(settings, emit=lambda line: show([line]))
    show(rehearsal_view(report))
    if report.error is not None:
        raise report.error


def _only(only: Step, settings: StepSettings) -> None:
    """One step of the workflow: its stage function, its view; `check` also prints the eval matrix as JSON."""
    from hfrelease.cli.output import echo, print_json, show
    from hfrelease.stages import release_view
    from hfrelease.stages.release import check_step, gate_step, publish_step

    if only == "check":
        report = check_step(settings)
        show(release_view.check_step_view(settings.manifest, report.entries))
        print_json(report.as_dict())
    elif only == "gate":
        decision = gate_step(settings)
        show(release_view.gate_step_view(decision))
        if (error := decision.error()) is not None:
            raise error
    else:
        published, verified = publish_step(settings, echo=echo)
        show(release_view.publish_step_view(published, verified))
