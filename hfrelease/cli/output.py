"""Terminal output: Rich for people (stderr for messages, stdout for tables), JSON for machines."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from hfrelease.redact import redact
from hfrelease.stages.view import visible

if TYPE_CHECKING:
    from hfrelease.stages.view import Block, Cell, Part


def _width(stream: TextIO) -> int | None:
    # Rich assumes 80 columns when output is piped; logs and CI consoles are wider than that, and
    # folded ids are harder to copy. A terminal keeps its own width.
    return None if stream.isatty() else int(os.environ.get("COLUMNS", "160"))


class PlainConsole(Console):
    """A Rich console that never writes a control character it was given as text.

    Rich drops BEL and CR but passes ESC through, so a manifest string holding an ANSI sequence would
    recolour the terminal, retitle the window or hide what follows. Text segments are made visible just
    before Rich adds its own styling; control segments (cursor moves of a live display) are Rich's own.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (segment if segment.control else Segment(visible(segment.text), segment.style) for segment in buffer)
        return super()._render_buffer(safe)


# Messages and progress go to stderr so that `--json` output on stdout stays machine-readable.
err_console = PlainConsole(stderr=True, highlight=False, width=_width(sys.stderr))
out_console = PlainConsole(highlight=False, width=_width(sys.stdout))


def print_error(message: str, *, hint: str | None = None) -> None:
    from hfrelease.stages.view import error_lines

    show(error_lines(message, hint))  # never hard-wrapped: error lines are copied into searches and issues


def say(text: str) -> None:
    """A message a stage announces as it goes (a Hub started, a note), on stderr, printed as written."""
    err_console.print(text, markup=False)


def done(text: str) -> None:
    """A finished step on stderr: a green tick, then `text` as written."""
    err_console.print(Text.assemble(("✓", "green"), f" {text}"))


@contextlib.contextmanager
def working(text: str) -> Iterator[Callable[[str], None]]:
    """A spinner saying `text` on stderr while the block runs; it yields how to say a step (on the spinner
    and printed below it, as written)."""
    with err_console.status(Text(text)) as spinner:

        def step(message: str) -> None:
            spinner.update(Text(message))
            say(f"  {message}")

        yield step


@contextlib.contextmanager
def live(view: Callable[[], Iterable[Block]]) -> Iterator[None]:
    """`view()` redrawn while the block runs, on a copy of the terminal's stderr: lm-eval and the benchmark
    write to descriptors 1 and 2, sent to the run's log meanwhile. Drawn like every view (`PlainConsole`)."""
    from rich.live import Live

    with os.fdopen(os.dup(2), "w", buffering=1) as terminal, Live(
            get_renderable=lambda: drawn(view()), refresh_per_second=4, transient=False, redirect_stdout=False,
            redirect_stderr=False, console=PlainConsole(file=terminal, highlight=False,
                                                        width=err_console.width if not terminal.isatty() else None)):
        yield


def echo(text: str) -> None:
    """A step a stage reports as it goes (a command it runs, a repo it stages), dimmed on stderr, unwrapped."""
    err_console.print(text, style="dim", soft_wrap=True, markup=False, highlight=False)


def print_json(data: Any) -> None:
    sys.stdout.write(redact(json.dumps(data, indent=2, sort_keys=False, default=str)) + "\n")
    sys.stdout.flush()


def show(view: Iterable[Block]) -> None:
    """Draw a report's view (`hfrelease.stages.view`): lines on stdout or stderr, tables on stdout."""
    from hfrelease.stages.view import Line

    for block in view:
        console = err_console if isinstance(block, Line) and block.err else out_console
        console.print(_drawn(block), soft_wrap=isinstance(block, Line) and not block.wrap)


def markup(parts: tuple[Part, ...]) -> str:
    """`parts` as Rich markup, its text escaped (for what takes markup: a progress bar's description)."""
    from rich.markup import escape

    from hfrelease.stages.view import Styled

    return "".join(f"[{p.style}]{escape(p.text)}[/]" if isinstance(p, Styled) else escape(p) for p in parts)


def drawn(view: Iterable[Block]) -> RenderableType:
    """A view as one Rich renderable (what a live display redraws)."""
    from rich.console import Group

    return Group(*(_drawn(block) for block in view))


def _drawn(block: Block) -> Text | Table:
    from hfrelease.stages.view import Line, Styled

    def text(cell: Cell, **options: Any) -> Text:
        parts = cell if isinstance(cell, tuple) else (cell,)
        return Text.assemble(*((p.text, p.style) if isinstance(p, Styled) else p for p in parts), **options)

    if isinstance(block, Line):
        return text(block.parts, **({"no_wrap": True, "overflow": "ellipsis"} if block.clip else {}))
    table = Table(title=Text(block.title, style="table.title"), title_justify="left")
    for column in block.columns:
        table.add_column(Text(column), overflow="fold")
    for row in block.rows:
        table.add_row(*(text(cell) for cell in row))
    return table
