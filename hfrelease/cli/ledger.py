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
    from hfrelease.cli.output import print_json, show
    from hfrelease.ledger.store import Ledger
    from hfrelease.stages.ledger_view import merge_view

    report = Ledger(target).merge(sources)
    print_json(report.as_dict()) if as_json else show(merge_view(report, target))
