"""The pipeline stages whose commands exist before their implementation lands.

Each parses its real options (so scripts and CI can be written against them now) and then says plainly
which issue builds it, with exit code 8. The options are validated: a bad one is a usage error (2).
"""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.errors import NotBuiltError

_MANIFEST = click.argument("manifest", type=click.Path(path_type=Path), default=Path())


@click.command()
@_MANIFEST
@click.option("--hub", default="local", show_default=True, help="Hub endpoint, or `local` for the built-in Hub.")
@click.option("--tag", help="The git tag being released; must equal the manifest's release tag.")
def release(manifest: Path, hub: str, tag: str | None) -> None:
    """Run the release job graph (check, eval per artifact, merge, render, publish) on this machine."""
    raise NotBuiltError("release", "GitHub Actions issue")
