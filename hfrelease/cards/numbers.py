"""How numbers read in a card, and the registry that ties every printed number to its ledger records.

Every measured number a card prints is made by `NumberRegistry.add`, which returns the text to print and
remembers (id, label, text, record names). The card lists these rows as its number provenance; the lint
checks each measured number against them, and the same id must show the same text in every card.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hfrelease.cards.inputs import RecordEntry
from hfrelease.cards.text import Markdown

TIMES = "\u00d7"  # the multiplication sign of "1.6 times faster"
DASH = "\u2013"  # the en dash of ranges ("1.52\u20131.66") and date ranges


@dataclass(frozen=True, kw_only=True)
class NumberRow:
    id: str
    label: str
    text: str
    records: tuple[str, ...]
    dates: tuple[str, ...]


class NumberRegistry:
    """The measured numbers of one card, in the order they were first printed."""

    def __init__(self) -> None:
        self._rows: dict[str, NumberRow] = {}

    def add(self, number_id: str, label: str, text: str, entries: Iterable[RecordEntry]) -> Markdown:
        chosen = tuple(entries)
        row = NumberRow(id=number_id, label=label, text=text, records=tuple(e.name for e in chosen),
                        dates=tuple(e.record.started_at for e in chosen))
        previous = self._rows.setdefault(number_id, row)
        # One id, one value: two different texts for one measurement would be a bug in context.py.
        assert previous.text == text, f"{number_id}: {previous.text} != {text}"
        return Markdown(text)

    @property
    def rows(self) -> list[NumberRow]:
        return list(self._rows.values())

    def date_range(self) -> tuple[str, str] | None:
        dates = sorted(d[:10] for row in self._rows.values() for d in row.dates)
        return (dates[0], dates[-1]) if dates else None


def fixed(value: float, places: int) -> str:
    text = f"{value:.{places}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def signed(value: float, places: int) -> str:
    text = f"{value:+.{places}f}"
    return "+" + text[1:] if text.startswith("-") and float(text) == 0 else text


_BINARY = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def binary_size(size: float) -> tuple[str, str]:
    """(value, unit) in binary units, one scale for every size on a card: GiB from 1 GiB, else MiB (KiB
    below 1 MiB), so a demo model's 1.9 MiB never prints as "0.0012 GB" beside a "2.68 GiB"."""
    for unit, scale in _BINARY:
        if size >= scale or unit == "KiB":
            value = size / scale
            return (f"{value:.2f}" if value < 10 else f"{value:.1f}"), unit
    raise AssertionError("unreachable")
