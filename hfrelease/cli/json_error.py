"""`json_on_error`: a `--json` command that fails still writes one JSON document on stdout.

Kept apart from `output.py` so that decorating a command does not import Rich (`--help` stays instant).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from hfrelease.errors import HfreleaseError

_Command = TypeVar("_Command", bound=Callable[..., Any])


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
