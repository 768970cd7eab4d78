"""`hfrelease hub serve`: the built-in Hub-compatible server (staging target and test fixture)."""

from __future__ import annotations

import click


@click.group()
def hub() -> None:
    """The built-in Hub-compatible server."""
