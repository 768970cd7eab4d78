"""`hfrelease bundle` and `hfrelease publish` (owned by the publish issue)."""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.errors import NotBuiltError

_MANIFEST = click.argument("manifest", type=click.Path(path_type=Path), default=Path())


@click.command()
@_MANIFEST
@click.option("--out", type=click.Path(path_type=Path), help="Write the bundles here instead of a temp dir.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout.")
def bundle(manifest: Path, out: Path | None, as_json: bool) -> None:
    """Plan the files each repo will hold, with a MANIFEST of sha256 and size."""
    raise NotBuiltError("bundle", "publish issue")


@click.command()
@_MANIFEST
@click.option("--hub", default="https://huggingface.co", show_default=True,
              help="Hub endpoint, or `local` for the built-in Hub.")
@click.option("--dry-run", is_flag=True, help="Show the plan per repo; push nothing (default without a token).")
@click.option("--pr", is_flag=True, help="Stop after staging every repo as a pull request.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and outcome as JSON on stdout.")
def publish(manifest: Path, hub: str, dry_run: bool, pr: bool, as_json: bool) -> None:
    """Push every repo of the family in one atomic, tagged commit each: all or nothing."""
    raise NotBuiltError("publish", "publish issue")
