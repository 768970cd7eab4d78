"""`hfrelease render`: parse options, call the card stage (`hfrelease.cards`), print what changed."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--artifact", "artifacts", multiple=True, help="Only this artifact id (repeatable).")
@click.option("--diff", is_flag=True, help="Show what changed against the last render, and write nothing.")
@click.option("--no-plots", is_flag=True, help="Skip the plots (faster; plot files on disk are left as they are).")
@click.option("--json", "as_json", is_flag=True, help="Print the changed files as JSON on stdout.")
@click.option("--since", help="Add 'Changes since SINCE' to each card: the ledger compared with this release tag "
                              "(or git:REF, or a ledger directory), as `hfrelease compare` does.")
@click.option("--hub", help="Hub endpoint for --since, or `local` (default: HF_ENDPOINT, else [publish].endpoint).")
@click.option("--hub-root", type=click.Path(path_type=Path), help="State directory of the local Hub.")
def render(
    manifest: Path, artifacts: tuple[str, ...], diff: bool, no_plots: bool, as_json: bool, since: str | None,
    hub: str | None, hub_root: Path | None,
) -> None:  # fmt: skip
    """Render model cards, citations and plots from the ledger into model_cards/<family>/<artifact>/.

    Every number comes from a ledger record; a gate the manifest promises but the ledger lacks stops
    the render (exit 6) naming it. Speed sections without records say "not measured".
    """
    from hfrelease.cards import apply_changes, plan_changes, read_inputs, render_family, unified_diff
    from hfrelease.cli.output import err_console, print_json
    from hfrelease.manifest import find_manifest, load_manifest

    loaded = load_manifest(find_manifest(manifest), check_files=False)
    known = {a.id for a in loaded.artifact}
    unknown = [a for a in artifacts if a not in known]
    if unknown:
        raise click.BadParameter(f"not artifacts of {loaded.family.name}: {', '.join(unknown)}",
                                 param_hint="--artifact")
    inputs = read_inputs(loaded)
    if since is not None:
        import dataclasses

        from hfrelease.cli.compare import read_comparison

        comparison = read_comparison(since, str(loaded.root / "results"), loaded, hub=hub, hub_root=hub_root)
        inputs = dataclasses.replace(inputs, changes=comparison)
    rendered = render_family(inputs, plots=not no_plots, artifacts=list(artifacts) or None)
    changes = plan_changes(rendered, loaded.root)
    if no_plots:
        changes = [c for c in changes if c.path.parent.name != "plots"]
    if as_json:
        print_json([{"path": str(c.path), "status": c.status} for c in changes])
    if diff:
        click.echo(unified_diff(changes, loaded.root), nl=False)
        if not as_json:
            err_console.print(f"{len(changes)} file{'s' if len(changes) != 1 else ''} would change (nothing written)")
        return
    apply_changes(changes)
    if not as_json:
        for change in changes:
            err_console.print(f"{change.status:>8} {change.path}")
        err_console.print(f"[green]✓[/] {len(rendered.cards)} cards rendered, {len(changes)} files changed")
