"""`hfrelease render`: parse options, call the render stage (`hfrelease.stages.cards`), print what changed."""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.cli import options


@click.command()
@options.MANIFEST
@options.artifacts()
@click.option("--diff", is_flag=True, help="Show what changed against the last render, and write nothing.")
@click.option("--no-plots", is_flag=True, help="Skip the plots (faster; plot files on disk are left as they are).")
@options.as_json("the changed files")
@click.option("--since", help="Add 'Changes since SINCE' to each card: the ledger compared with this release tag "
                              "(or git:REF, or a ledger directory), as `hfrelease compare` does; `previous`: the "
                              "family's release before this one on the Hub (a first release: no section).")
@click.option("--hub", help="Hub endpoint for --since, or `local` (default: HF_ENDPOINT, else [publish].endpoint).")
@options.LOCAL_HUB_ROOT
def render(
    manifest: Path, artifacts: tuple[str, ...], diff: bool, no_plots: bool, as_json: bool, since: str | None,
    hub: str | None, hub_root: Path | None,
) -> None:  # fmt: skip
    """Render model cards, citations and plots from the ledger into model_cards/<family>/<artifact>/.

    Every number comes from a ledger record; a gate the manifest promises but the ledger lacks stops
    the render (exit 6) naming it. Speed sections without records say "not measured".
    """
    from hfrelease.cli.output import print_json, say, show
    from hfrelease.stages.cards import RenderSettings, render_stage, render_view

    report = render_stage(RenderSettings(manifest=manifest, artifacts=artifacts, plots=not no_plots, write=not diff,
                                         since=since, hub=hub, hub_root=hub_root), announce=say)
    if as_json:
        print_json(report.as_dict()["changes"])
    if diff:
        click.echo(report.diff(), nl=False)
    if not as_json:
        show(render_view(report))
