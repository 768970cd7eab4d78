"""`hfrelease check`: validate one or more family manifests and show what they declare."""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.cli import options


@click.command()
@click.argument("manifests", nargs=-1, type=click.Path(path_type=Path))
@options.as_json("the result")
@click.option("--cards", is_flag=True, help="Also lint the rendered model cards against the ledger.")
@click.option("--since", help="With --cards: the cards were rendered with `render --since SINCE`; their "
              "'Changes since' numbers are re-derived from that comparison.")
@click.option("--max-age-days", type=click.IntRange(min=0), help="With --cards: fail when a card's numbers are older.")
@click.option("--offline", is_flag=True, help="Preflight without asking the Hub (revisions, release tags, Hub chat "
              "templates are not checked).")
@click.option("--no-preflight", "no_preflight", is_flag=True,
              help="Only validate the manifest: skip the preflight (lm-eval tasks and metrics, chat templates, "
                   "plugins, Hub revisions and tags, workflow install lines).")
def check(manifests: tuple[Path, ...], as_json: bool, cards: bool, max_age_days: int | None, offline: bool = False,
          no_preflight: bool = False, since: str | None = None) -> None:
    """Validate family manifests (release.toml files or their directories), then preflight them.

    With no argument: ./release.toml, or else every model_cards/*/release.toml below the current directory.
    Every file a bundle would ship (declared files, checkpoints, cards, ledger, plugin) and every section a
    card quotes is judged as `hfrelease bundle` judges it: inside the family tree, no secret, no pickle.
    The preflight finds before any GPU time what would fail on a runner: each gate's lm-eval task, metric
    and filter exist and its task fits its api; a thinking gate's chat template takes the thinking switch;
    every plugin directory is a package; Hub revisions exist and the release tag is not taken yet; the
    repository's workflows install hfrelease from somewhere that resolves. With --cards, the rendered cards
    are linted instead of the preflight.
    Every problem is reported at once, each with its place in the file; exit code 3 when any is found.
    """
    from hfrelease.cli.output import print_json, say, show
    from hfrelease.stages.check import CheckSettings, check_stage, manifest_view, valid_view

    settings = CheckSettings(manifests=manifests, cards=cards, max_age_days=max_age_days, since=since, offline=offline,
                             preflight=not no_preflight)
    report = check_stage(settings, announce=say, quiet=as_json,
                         checked=None if as_json else lambda check: show(manifest_view(check)))
    print_json(report.as_dict()) if as_json else show(valid_view(report))
    click.get_current_context().exit(int(report.exit_code))

