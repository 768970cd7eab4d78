"""`hfrelease compare`: parse options, call its stage (`hfrelease.stages.cards.compare_stage`), print a table,
JSON or Markdown."""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.cli import options


@click.command()
@click.argument("old")
@click.argument("new")
@click.option("--manifest", "manifest_path", type=click.Path(path_type=Path),
              help="The family's release.toml or its directory (default: ./release.toml); needed for git:REF "
                   "and release-tag sides.")  # fmt: skip
@click.option("--hub", help="Hub endpoint for release tags, or `local` for the built-in Hub "
                            "(default: HF_ENDPOINT when set, else [publish].endpoint).")  # fmt: skip
@options.LOCAL_HUB_ROOT
@options.as_json("the comparison")
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
      previous   the family's newest release tag on the Hub but the manifest's own (see README)

    Rows pair by what they measure (gate x mode x artifact; workload x config x artifact); each shows the
    difference NEW - OLD with a 95 % interval that names what it resamples (a gate's items, paired when both
    sides scored the same ones; a speed row's repeats, each side's from one server session) and a verdict,
    and the inputs that changed between the two records. Exit 2 for a side that is not a readable ledger
    (unknown tag, unreadable ref, not a ledger, two families), 6 for a damaged record, 7 when the Hub fails.
    """
    from hfrelease.cli.output import print_json, say, show
    from hfrelease.compare import comparison_json, comparison_markdown
    from hfrelease.stages.cards import compare_stage
    from hfrelease.stages.compare_view import comparison_view

    comparison = compare_stage(old, new, manifest_path, hub=hub, hub_root=hub_root, as_json=as_json,
                               markdown=markdown, announce=say)
    if as_json:
        print_json(comparison_json(comparison))
    elif markdown:
        click.echo(comparison_markdown(comparison), nl=False)
    else:
        show(comparison_view(comparison))
