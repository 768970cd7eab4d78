"""`hfrelease ledger`: inspect and merge ledger records (e.g. from a CI matrix's per-artifact jobs)."""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.cli import options


@click.group()
def ledger() -> None:
    """The ledger of recorded results (model_cards/<family>/results/)."""


@ledger.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--into", "target", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The ledger directory to merge into (e.g. model_cards/<family>/results).")
@options.as_json("the merge report")
def merge(sources: tuple[Path, ...], target: Path, as_json: bool) -> None:
    """Copy every record of SOURCES into --into: nothing is overwritten, identical records are skipped."""
    from hfrelease.cli.output import err_console, print_json
    from hfrelease.ledger.store import Ledger

    report = Ledger(target).merge(sources)
    if as_json:
        print_json({
            "added": [str(p) for p in report.added],
            "identical": [str(p) for p in report.identical],
            "skipped_invalid": [{"path": str(s.path), "reason": s.reason} for s in report.skipped_invalid],
        })
    else:
        err_console.print(
            f"merged into {target}: {len(report.added)} added, {len(report.identical)} already there, "
            f"{len(report.skipped_invalid)} invalid skipped"
        )
        for skipped in report.skipped_invalid:
            err_console.print(f"  [yellow]skipped[/] {skipped.path}: {skipped.reason}")
