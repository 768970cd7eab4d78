"""A rendered card read back: its text, and the parts of it the lint's rules read (the measured blocks,
the number provenance list, a table row's cells).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hfrelease.manifest import Manifest

MEASURED = re.compile(r"<!-- measured:begin -->\n(.*?)<!-- measured:end -->", re.S)
PROVENANCE = re.compile(r"<!-- provenance:begin -->\n(.*?)<!-- provenance:end -->", re.S)
PROVENANCE_ROW = re.compile(r"^- `([^`]+)` = (\S+): .*; ((?:`[^`]+`(?:, )?)+)$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


@dataclass(frozen=True, kw_only=True)
class CardText:
    """A rendered card as read back from its README.md."""

    artifact_id: str
    path: Path
    text: str


def read_cards(manifest: Manifest, family_root: Path | None = None) -> tuple[list[CardText], list[str]]:
    """The rendered README.md of each artifact, and a problem for each one missing."""
    root = family_root or manifest.root
    cards, problems = [], []
    for artifact in manifest.artifact:
        path = root / artifact.id / "README.md"
        if not path.is_file():
            problems.append(f"{path}: no rendered card (run `hfrelease render`)")
            continue
        cards.append(CardText(artifact_id=artifact.id, path=path, text=path.read_text(encoding="utf-8")))
    return cards, problems


def cells(line: str) -> list[str]:
    """A Markdown table row's cells, split at unescaped pipes."""
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return re.split(r"(?<!\\)\|", inner)


def provenance_table(body: str) -> dict[str, tuple[str, list[str]]]:
    """The number provenance list: `- `id` = value: label; `record`, `record``, one line per number."""
    table: dict[str, tuple[str, list[str]]] = {}
    for block in PROVENANCE.findall(body):
        for line in block.splitlines():
            match = PROVENANCE_ROW.match(line)
            if match is None:
                continue
            names = [m.group(2) for m in CODE_SPAN.finditer(match.group(3))]
            table[match.group(1)] = (match.group(2), names)
    return table
