"""What `hfrelease ledger merge` prints for people: how many records it added, and each file it refused."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.stages.view import Block, Styled, line

if TYPE_CHECKING:
    from hfrelease.ledger.store import MergeReport


def merge_view(report: MergeReport, target: Path) -> list[Block]:
    view: list[Block] = [line(f"merged into {target}: {len(report.added)} added, {len(report.identical)} already "
                              f"there, {len(report.skipped_invalid)} invalid skipped", err=True, wrap=True)]
    return view + [line("  ", Styled("skipped", "yellow"), f" {skipped.path}: {skipped.reason}", err=True, wrap=True)
                   for skipped in report.skipped_invalid]
