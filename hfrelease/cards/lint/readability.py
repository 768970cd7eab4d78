"""The lint's readability rules (issue 13): each catches one defect a reader met in a rendered card:
tables too wide for the Hub's column, "best" slowdowns, figures without their spread or interval,
meaningless latencies, inconsistent units, a link to a repo the release never publishes, two cards
naming different best configs.
"""

from __future__ import annotations

import re

from hfrelease.cards.card_text import MEASURED, CardText, cells
from hfrelease.cards.lint.links import HUB_LINK
from hfrelease.manifest import Manifest

# The Hub shows a model card in a column about 730 px wide at a 1200 px window; at the 14 px of its table
# text a character is about 7 px, so a table of about 100 characters fits. A table's width is measured as
# the sum, over its columns, of the column's need plus 3 characters of padding and border: a column needs
# its longest unbreakable word (what would overflow and scroll; browsers break lines at spaces and after
# hyphens, UAX #14) or half its widest cell (a cell may wrap onto two lines, not the 4 to 8 a name wrapped
# onto in a 12-column table), whichever is more.
MAX_TABLE_WIDTH = 100
_MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)|\*\*|`+|\\(?=[^\w\s])|<br>")
_SPEEDUP = re.compile(r"(\d+\.\d+)\u00d7")
_RANGE = re.compile(r"\(\d+(?:\.\d+)?\u2013\d+(?:\.\d+)?\)|\(n = 1\)")
_ZERO_WIDTH = re.compile(r"(?<![\w.])([+-]?\d+(?:\.\d+)?) to \1(?![\w.])")


def visible(cell: str) -> str:
    """The text a reader sees in a table cell: link targets, emphasis, code ticks and escapes removed."""
    return _MARKUP.sub(lambda m: m.group(1) or "", cell).strip()


def tables(body: str) -> list[list[list[str]]]:
    """Every GFM table of a Markdown body (outside code fences), as rows of visible cells."""
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    fence = False
    for line in [*body.splitlines(), ""]:
        if line.lstrip().startswith("```"):
            fence = not fence
        stripped = line.strip()
        if not fence and stripped.startswith("|"):
            if not re.fullmatch(r"[|\s:-]+", stripped):
                current.append([visible(c) for c in cells(stripped)])
            continue
        if current:
            found.append(current)
            current = []
    return found


def table_width(rows: list[list[str]]) -> int:
    """The width proxy documented at MAX_TABLE_WIDTH, in characters."""
    columns = max(len(r) for r in rows)
    width = 0
    for i in range(columns):
        cells = [r[i] for r in rows if i < len(r)]
        longest_word = max((len(w) for c in cells for w in re.split(r"\s+|(?<=-)", c)), default=0)
        widest = max((len(c) for c in cells), default=0)
        width += max(longest_word, -(-widest // 2)) + 3
    return width


def readability(manifest: Manifest, card: CardText, body: str) -> list[str]:
    """Problems a reader of the card would meet: tables too wide, "best" slowdowns, figures without their
    spread or interval, meaningless latencies, inconsistent units, an unpublished repo linked."""
    where = str(card.path)
    problems = []
    for rows in tables(body):
        width = table_width(rows)
        if width > MAX_TABLE_WIDTH:
            problems.append(f"{where}: table {' | '.join(rows[0])[:60]!r} is about {width} characters wide, more than "
                            f"the {MAX_TABLE_WIDTH} the Hub's card column shows at 1200 px (it scrolls or wraps)")
        problems += _table_rules(where, rows)
    for block in MEASURED.findall(body):
        for line in block.splitlines():
            if not line.startswith("- "):
                continue
            speedup = _SPEEDUP.search(line)
            # Only a speedup over no speculation makes a config "slower"; a quant's decode speed against the
            # reference's may be below 1x and is stated all the same.
            if speedup and "over no speculation" in line and float(speedup.group(1)) < 1.0:
                problems.append(f"{where}: headline {line[2:60]!r}... headlines a config slower than no speculation")
            if "tok/s" in line and not _RANGE.search(line):
                problems.append(f"{where}: headline {line[2:60]!r}... gives a speed without the spread of its repeats")
            if "vs the reference" in line and not ("CI" in line or "pairs" in line):
                problems.append(f"{where}: headline {line[2:60]!r}... gives a quality delta without its interval and n")
    problems += [f"{where}: interval {m.group(0)!r} has zero width without saying that every pair agrees"
                 for m in _ZERO_WIDTH.finditer(body)]
    # Generated text only (measured blocks and table headers): a maintainer's prose may say "~7 GB".
    generated = "\n".join(MEASURED.findall(body) + [" | ".join(rows[0]) for rows in tables(body)])
    problems += [f"{where}: {m.group(0)!r}: sizes are in binary units (GiB/MiB), never GB"
                 for m in re.finditer(r"\bGB\b", generated)]
    problems += [f"{where}: {m.group(0)!r} is unreadable: a size this small prints in MiB"
                 for m in re.finditer(r"\b0\.0\d+ GiB", body)]
    problems += [f"{where}: 'between {m.group(1)} and {m.group(1)}' names one date as a range"
                 for m in re.finditer(r"between (\d{4}-\d{2}-\d{2}) and \1", body)]
    artifact = manifest.artifact_by_id(card.artifact_id)
    if artifact.kind == "draft" and "Draft gates" not in body:
        problems.append(f"{where}: a draft's card must show its draft-gate verdicts")
    sources = {a.source.hub for a in manifest.artifact if a.source.hub} | {manifest.family.base_model}
    dead = {a.repo for a in manifest.artifact if not a.publish and a.repo not in sources}
    problems += [f"{where}: links to {url}, a repo this release never publishes (a dead link)"
                 for url in HUB_LINK.findall(body) if "/".join(url.split("/")[3:5]) in dead]
    return problems


def _table_rules(where: str, rows: list[list[str]]) -> list[str]:
    header, problems = rows[0], []
    for row in rows[1:]:
        for name, cell in zip(header, row, strict=False):
            if "tok/s" in name and re.match(r"^\d", cell) and not _RANGE.search(cell):
                problems.append(f"{where}: {name} {cell!r} is shown without the spread of its repeats")
            if name.startswith("ITL") and re.fullmatch(r"0(\.0+)?", cell):
                problems.append(f"{where}: {name} {cell} ms is printed as a number but measures bunched output")
            if name.startswith("Delta") and re.match(r"^[+-]\d", cell) and not ("CI" in cell or "pairs" in cell):
                problems.append(f"{where}: delta {cell!r} is shown without its interval and n")
        if "Best" in header and len(row) == len(header) and row[header.index("Best")] == "best":
            speedup = next((_SPEEDUP.search(c) for c in row if _SPEEDUP.search(c)), None)
            if speedup and float(speedup.group(1)) < 1.0:
                problems.append(f"{where}: {row[0]} is marked best at {speedup.group(0)}, slower than no speculation")
    return problems


def best_agreement(manifest: Manifest, cards: list[CardText]) -> list[str]:
    """The best config each card names for a (served artifact, workload) must be the same in every card."""
    seen: dict[tuple[str, str], tuple[str, str]] = {}
    problems = []
    for card in cards:
        artifact = manifest.artifact_by_id(card.artifact_id)
        server = artifact.draft.target if artifact.draft is not None else artifact.id
        for label, best in re.findall(r"^### (.+)\n\n[^\n]*(?:best|fastest) config: `([^`]+)`", card.text, re.M):
            other = seen.setdefault((server, label), (best, str(card.path)))
            if other[0] != best:
                problems.append(f"{card.path}: calls `{best}` the best config for {label} on {server}, "
                                f"but {other[1]} calls `{other[0]}` best")
    return problems
