"""A report's view for people, as data: lines and tables of styled text, which the CLI draws with Rich.

Stages decide what a report says and how each number reads; `hfrelease.cli.output.show` only draws it.
Text is never markup, so a manifest string holding `[bold]` prints as written; a style is a colour or
weight name ("green", "bold red", "dim"). Nor does text reach a terminal as control characters: the CLI's
console writes each as its escape (`visible`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Styled:
    """Text in a style."""

    text: str
    style: str


Part = str | Styled
Cell = Part | tuple[Part, ...]


@dataclass(frozen=True, kw_only=True)
class Line:
    """One printed line: on stderr when `err` (messages; stdout stays the `--json` document's); hard-wrapped
    at the console's width only when `wrap` (ids, commands and errors are copied from a line: kept whole)."""

    parts: tuple[Part, ...]
    err: bool = False
    wrap: bool = False
    clip: bool = False  # cut at the width with '…' (a live display must keep its height)


@dataclass(frozen=True, kw_only=True)
class Table:
    """A table on stdout; its cells fold rather than being cut (ids and repo names stay whole)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


Block = Line | Table


def line(*parts: Part, err: bool = False, wrap: bool = False, clip: bool = False) -> Line:
    return Line(parts=parts, err=err, wrap=wrap, clip=clip)


def note(*parts: Part, style: str = "yellow", label: str = "note:") -> Line:
    """A message on stderr: `note: ...` (or another label) in `style`."""
    return Line(parts=(Styled(label, style), " ", *parts), err=True)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Cell]]) -> Table:
    return Table(title=title, columns=tuple(columns), rows=tuple(tuple(row) for row in rows))


def error_lines(message: str, hint: str | None = None) -> list[Line]:
    """An error as every command says it, on stderr: `error: ...`, then `hint: ...` (secrets redacted)."""
    from hfrelease.redact import redact

    lines = [note(redact(message), style="bold red", label="error:")]
    return lines + ([note(redact(hint), style="dim", label="hint:")] if hint else [])


# Characters a terminal acts on rather than shows: C0 controls but newline and tab (ESC starts colour,
# cursor and title sequences), DEL, C1 controls, and the bidirectional overrides and isolates that make
# text display in another order than it reads ("Trojan Source", CVE-2021-42574).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with every character a terminal would act on written as its escape (ESC -> \\x1b)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
