"""Terminal output: Rich for people (stderr for messages, stdout for tables), JSON for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from hfrelease.redact import redact

# Messages and progress go to stderr so that `--json` output on stdout stays machine-readable.
err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


def print_error(message: str, *, hint: str | None = None) -> None:
    # soft_wrap: error lines are copied into searches and issues; never hard-wrap them.
    err_console.print(f"[bold red]error:[/] {escape(redact(message))}", soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(redact(hint))}", soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(redact(json.dumps(data, indent=2, sort_keys=False, default=str)) + "\n")
    sys.stdout.flush()
