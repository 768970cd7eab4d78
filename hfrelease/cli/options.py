"""Options several commands share, declared once, and `--json`'s promise on errors; without Rich (`--help`
stays instant)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hfrelease.errors import HfreleaseError

_Command = TypeVar("_Command", bound=Callable[..., Any])

# The family's release.toml or its directory (default: the current directory).
MANIFEST = click.argument("manifest", type=click.Path(path_type=Path), default=Path())
HUB = click.option("--hub", help="Hub endpoint URL, or `local` for the built-in Hub (default: [publish].endpoint).")
LOCAL_HUB_ROOT = click.option("--hub-root", type=click.Path(path_type=Path, file_okay=False),
                              help="State directory of the local Hub.")


def hub_root(default: str = "<family>/.hfrelease/hub") -> Callable[[_Command], _Command]:
    """`--hub-root DIR`: where the built-in Hub of `--hub local` keeps its repos."""
    return click.option("--hub-root", type=click.Path(path_type=Path, file_okay=False),
                        help=f"State directory of `--hub local` (default: {default}).")


def artifacts(only: str = "Only") -> Callable[[_Command], _Command]:
    """`--artifact ID`, repeatable; every command checks the ids against the manifest (`manifest.selection`)."""
    return click.option("--artifact", "artifacts", multiple=True, help=f"{only} this artifact id (repeatable).")


def as_json(what: str) -> Callable[[_Command], _Command]:
    """`--json`: `what` as one JSON document on stdout (messages stay on stderr)."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON on stdout.")


def json_on_error(command: _Command) -> _Command:
    """Wrap a command with `--json` (parameter `as_json`): on an error, `{"exit_code": N, "error": {...}}`.

    A program reading stdout gets a document instead of nothing; the message and hint still go to stderr
    once, as for every error (`hfrelease.cli.main`).
    """

    @functools.wraps(command)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except HfreleaseError as error:
            if kwargs.get("as_json"):
                from hfrelease.cli.output import print_json

                print_json({"exit_code": int(error.exit_code),
                            "error": {"kind": type(error).__name__, "message": error.message, "hint": error.hint}})
            raise

    return wrapped  # type: ignore[return-value]
