"""`hfrelease compare`: parse options, call `hfrelease.compare.compare_family`, print a table, JSON or Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from hfrelease.compare import FamilyComparison
    from hfrelease.manifest import Manifest


def _needs_manifest(spec: str) -> bool:
    return spec.startswith(("git:", "hub:")) or not Path(spec).is_dir()


@click.command()
@click.argument("old")
@click.argument("new")
@click.option("--manifest", "manifest_path", type=click.Path(path_type=Path),
              help="The family's release.toml or its directory (default: ./release.toml); needed for git:REF "
                   "and release-tag sides.")  # fmt: skip
@click.option("--hub", help="Hub endpoint for release tags, or `local` for the built-in Hub "
                            "(default: HF_ENDPOINT when set, else [publish].endpoint).")  # fmt: skip
@click.option("--hub-root", type=click.Path(path_type=Path, file_okay=False), help="State directory of the local Hub.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on stdout.")
@click.option("--markdown", is_flag=True, help="Print the comparison as a Markdown section on stdout.")
def compare(
    old: str, new: str, manifest_path: Path | None, hub: str | None, hub_root: Path | None, as_json: bool,
    markdown: bool,
) -> None:  # fmt: skip
    """Compare two ledgers of a family: every measurement on both sides, its change and whether it is noise.

    \b
    OLD and NEW are each one of:
      DIR        a ledger directory (model_cards/<family>/results)
      git:REF    the family's ledger at a commit, branch or tag of its git repository
      TAG        a release tag (or hub:TAG), read from the ledger/ of every published repo on the Hub

    Rows pair by what they measure (gate x mode x artifact; workload x config x artifact); each shows the
    difference NEW - OLD with a 95 % interval (paired bootstrap on the same items, else unpaired) and a
    verdict, and the inputs that changed between the two records. Exit 2 for a side that is not a
    readable ledger (unknown tag, unreadable ref, not a ledger, two families), 6 for a damaged record,
    7 when the Hub fails.
    """
    from hfrelease.cli.output import err_console
    from hfrelease.manifest import find_manifest, load_manifest
    from hfrelease.stages.cards import read_comparison

    if as_json and markdown:
        raise click.UsageError("--json and --markdown: choose one")
    manifest: Manifest | None = None
    if manifest_path is not None or _needs_manifest(old) or _needs_manifest(new):
        manifest = load_manifest(find_manifest(manifest_path or Path()), check_files=False)
    comparison = read_comparison(old, new, manifest, hub=hub, hub_root=hub_root, announce=err_console.print)
    _print(comparison, as_json=as_json, markdown=markdown)


def _print(comparison: FamilyComparison, *, as_json: bool, markdown: bool) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import make_table, out_console, print_json
    from hfrelease.compare import comparison_json, comparison_markdown
    from hfrelease.compare.report import changed_text, format_delta, format_interval, format_value, metric_label, what

    if as_json:
        print_json(comparison_json(comparison))
        return
    if markdown:
        click.echo(comparison_markdown(comparison), nl=False)
        return
    table = make_table("measurement", "artifact", "metric", "before", "now", "change", "95 % interval", "verdict",
                       "inputs changed", title=f"{comparison.family}: {comparison.old_label} → {comparison.new_label}")
    colours = {"better": "green", "worse": "red"}
    for row in comparison.rows:
        colour = colours.get(row.verdict)
        verdict = f"[{colour}]{row.verdict}[/]" if colour else row.verdict
        table.add_row(escape(what(row)), escape(row.artifact), metric_label(row), format_value(row, row.old),
                      format_value(row, row.new), format_delta(row, row.delta), format_interval(row), verdict,
                      escape(changed_text(row)))
    out_console.print(table)
    for side, label in (("old", comparison.old_label), ("new", comparison.new_label)):
        only = [r for r in comparison.one_sided if r.side == side]
        if only:
            listed = ", ".join(escape(f"{what(r)} of {r.artifact}") for r in only)
            out_console.print(f"only in {escape(label)}: {listed}")
