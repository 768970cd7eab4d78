"""`hfrelease hub serve`: the built-in Hub-compatible server (staging target and test fixture)."""

from __future__ import annotations

import logging
from pathlib import Path

import click


@click.group()
def hub() -> None:
    """The built-in Hub-compatible server."""


@hub.command()
@click.option("--root", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Directory holding the Hub's state.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port (0: a free one, printed at start).")
@click.option("--token", "tokens", multiple=True, envvar="HFRELEASE_HUB_TOKENS",
              help="A token allowed to write (repeatable; env HFRELEASE_HUB_TOKENS, space-separated). "
              "Without any, one is made and its file's path printed.")
@click.pass_context
def serve(ctx: click.Context, root: Path, host: str, port: int, tokens: tuple[str, ...]) -> None:
    """Serve a Hub-compatible API from ROOT until interrupted (huggingface_hub and `hf` work against it)."""
    from hfrelease.cli.output import say
    from hfrelease.hub import ServeSettings, run

    if ctx.obj.get("verbose"):
        # The access log: method, path, status and request id, never headers (they carry tokens).
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    run(ServeSettings(root=root, host=host, port=port, tokens=tokens), announce=say)
