"""`hfrelease preview`: the family's rendered cards as the Hub shows them, as static HTML or served locally."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import click

from hfrelease.cli import options


@click.command()
@options.MANIFEST
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write the pages to DIR and exit (default: serve them until interrupted).")
@click.option("--port", default=0, show_default=True, help="Port to serve on (0: a free one, printed at start).")
def preview(manifest: Path, out: Path | None, port: int) -> None:
    """Show the rendered cards as the Hub would: metadata sidebar, GFM tables, images, cross-links.

    Each card is laid out in the Hub's card column at a 1200 px window; links between the family's
    repos lead to each other's pages. Render the cards first (`hfrelease render`).
    """
    from hfrelease.cli.output import done, say
    from hfrelease.manifest import find_manifest, load_manifest
    from hfrelease.preview import read_preview, served_preview, write_preview

    loaded = load_manifest(find_manifest(manifest), check_files=False)
    site = read_preview(loaded)
    if out is not None:
        pages = write_preview(site, out)
        done(f"{len(site.cards)} cards: {pages[0]}")
        return
    with served_preview(site, port=port) as url:
        say(f"serving {len(site.cards)} cards at {url} (Ctrl-C to stop)")
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a preview ends: exit 0, not 130
            threading.Event().wait()
