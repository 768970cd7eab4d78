"""Terminal output: Rich for people (stderr for messages, stdout for tables), JSON for machines."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hfrelease.redact import redact


def _width(stream: TextIO) -> int | None:
    # Rich assumes 80 columns when output is piped; logs and CI consoles are wider than that, and
    # folded ids are harder to copy. A terminal keeps its own width.
    return None if stream.isatty() else int(os.environ.get("COLUMNS", "160"))


# Messages and progress go to stderr so that `--json` output on stdout stays machine-readable.
err_console = Console(stderr=True, highlight=False, width=_width(sys.stderr))
out_console = Console(highlight=False, width=_width(sys.stdout))


def print_error(message: str, *, hint: str | None = None) -> None:
    # soft_wrap: error lines are copied into searches and issues; never hard-wrap them.
    err_console.print(f"[bold red]error:[/] {escape(redact(message))}", soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(redact(hint))}", soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(redact(json.dumps(data, indent=2, sort_keys=False, default=str)) + "\n")
    sys.stdout.flush()


def make_table(*columns: str, title: str | None = None) -> Table:
    """A Rich table whose cells fold rather than being cut with '…': ids and repo names must stay whole."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table
