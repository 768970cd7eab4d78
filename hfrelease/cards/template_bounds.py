"""Bounds on rendering a card template: a family's template override is code, and code can loop or allocate
without end.

A family may override card partials (`model_cards/<family>/templates/`), and Jinja's sandbox keeps such a
template from Python's internals but not from work without bound: `range` is capped at 100,000 items, yet two
nested loops over it spin 10^10 times, and `"x" * 10**11` asks for 100 GB (`MemoryError` on a good day, the
kernel's OOM killer on another). So:

- every operation that builds a sequence of its operands' size times a number (`*`, `**`) is checked before
  it runs (the sandbox's documented hook, `intercepted_binops` / `call_binop`);
- the card is rendered as a stream (`Template.generate`), and more than `MAX_CARD_CHARS` of Markdown stops it;
- a render that has not finished after `MAX_RENDER_SECONDS` is interrupted: a loop that prints nothing never
  returns to the stream, so a timer raises an exception in the rendering thread at its next bytecode
  (CPython's `PyThreadState_SetAsyncExc`, the only way to stop a Python loop from another thread; Jinja has no
  step budget of its own).

Each is a `CardError` (exit 3) naming the template, instead of a hang or exit 1 "a bug". The limits are far
above any real card (the demo's largest is under 60,000 characters and renders in well under a second).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping
from typing import Any

from jinja2 import Template
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context as JinjaContext
from jinja2.sandbox import SandboxedEnvironment

from hfrelease.cards.errors import CardError

MAX_CARD_CHARS = 4_000_000
MAX_RENDER_SECONDS = 60.0
MAX_BUILT_ITEMS = 1_000_000  # the most items (characters, list elements) one `*` may build; 10^k digits for `**`


class RenderTimeout(Exception):
    """Raised asynchronously in a card render that ran past its time."""


class BoundedSandbox(SandboxedEnvironment):
    """The card sandbox with `*` and `**` refused when their result would be larger than `MAX_BUILT_ITEMS`."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: JinjaContext, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple | bytes) and isinstance(times, int) \
                        and len(seq) * times > MAX_BUILT_ITEMS:
                    raise SecurityError(f"a template multiplies a sequence of {len(seq)} by {times}, more than "
                                        f"{MAX_BUILT_ITEMS:,} items")
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
                and right > 0 and right * abs(left).bit_length() > MAX_BUILT_ITEMS:
            raise SecurityError(f"a template raises {left} to the power {right}, a number of more than "
                                f"{MAX_BUILT_ITEMS:,} bits")
        return super().call_binop(context, operator, left, right)


def render_bounded(template: Template, context: Mapping[str, Any], *, max_chars: int | None = None,
                   seconds: float | None = None) -> str:
    """`template.render(context)`, stopped with a CardError past `max_chars` of output or `seconds` of time
    (by default the module's limits, read at each call)."""
    max_chars = MAX_CARD_CHARS if max_chars is None else max_chars
    seconds = MAX_RENDER_SECONDS if seconds is None else seconds
    thread = threading.get_ident()
    timer = threading.Timer(seconds, _interrupt, args=(thread,))
    timer.daemon = True
    chunks: list[str] = []
    size = 0
    try:
        timer.start()  # inside: a short timer may fire before start() returns
        for chunk in template.generate(context):
            size += len(chunk)
            if size > max_chars:
                raise CardError(f"card template {template.name!r} wrote more than {max_chars:,} characters",
                                hint="A loop in the family's template override runs far longer than a card is.")
            chunks.append(chunk)
    except RenderTimeout:
        raise CardError(f"card template {template.name!r} did not finish within {seconds:g} s",
                        hint="A loop in the family's template override runs without end; see its "
                        "templates/ folder.") from None
    except MemoryError:
        raise CardError(f"card template {template.name!r} ran out of memory",
                        hint="The family's template override builds something without bound.") from None
    finally:
        _disarm(timer, thread)
    return "".join(chunks)


def _disarm(timer: threading.Timer, thread: int) -> None:
    """Stop the timer; if it fired as the render ended, its exception is caught here or withdrawn unraised."""
    try:
        timer.cancel()
        timer.join()
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), None)
    except RenderTimeout:
        pass  # delivered here: the render itself had ended


def _interrupt(thread: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(RenderTimeout))
