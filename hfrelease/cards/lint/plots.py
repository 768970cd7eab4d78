"""The lint's plot rule: each plot a card shows carries its description (a PNG text chunk written by
`plots.py`), and reads as the tables do: no plot without its table (none in plots/ that the card does not
show, none in a section without a measured table), no inter-token latency the load table refuses as bunched,
the repeats' range where the table prints one, and no two series the tables print alike drawn twice.
"""

from __future__ import annotations

import re
from typing import Any

from hfrelease.cards.card_text import CardText
from hfrelease.manifest import Manifest


def png_text(data: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG (keyword -> text); {} for anything that is not a PNG."""
    import struct

    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return {}
    found, offset = {}, 8
    while offset + 8 <= len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind, body = data[offset + 4:offset + 8], data[offset + 8:offset + 8 + length]
        if kind == b"tEXt" and b"\x00" in body:
            key, _, text = body.partition(b"\x00")
            found[key.decode("latin-1")] = text.decode("latin-1")
        offset += 12 + length
    return found


def plots(manifest: Manifest, card: CardText, body: str) -> list[str]:
    """Each plot the card shows carries its description, and it reads as the tables do: their units,
    labels not ids, axes from zero, this artifact highlighted, nothing a published card leaves out."""
    import json

    from hfrelease.cards.plots import DESCRIPTION

    where, problems = str(card.path), []
    artifact = manifest.artifact_by_id(card.artifact_id)
    ids = {a.id for a in manifest.artifact} - {a.title for a in manifest.artifact if a.title}
    ids |= {w.id for w in manifest.workload} - {w.label for w in manifest.workload if w.label}
    sources = {a.source.hub for a in manifest.artifact if a.source.hub} | {manifest.family.base_model}
    hidden = {a.id for a in manifest.artifact if not a.publish and a.repo not in sources} if artifact.publish else set()
    for target in re.findall(r"!\[[^\]]*\]\((plots/[^)\s]+\.png)\)", body):
        path = card.path.parent / target
        if not path.is_file():
            continue  # reported by the link check
        text = png_text(path.read_bytes()).get(DESCRIPTION)
        if text is None:
            problems.append(f"{where}: {target} carries no plot description: its units, labels, zero and "
                            "highlight cannot be checked (re-render it)")
            continue
        plot = json.loads(text)
        if not plot.get("zero_based"):
            problems.append(f"{where}: {target} does not start its value axes at zero")
        problems += [f"{where}: {target} draws {a}, which this published card leaves out" for a in plot["artifacts"]
                     if a in hidden]
        for panel in plot["panels"]:
            problems += [f"{where}: {target} names a series by its id {s.split(',')[0]!r}, not its label"
                         for s in panel["series"] if s.split(",")[0].split(" on ")[0] in ids]
            if plot["kind"] == "quality" and "Delta, points" in body and "points" not in panel["ylabel"]:
                problems.append(f"{where}: {target} plots deltas in {panel['ylabel']!r}; the tables use points")
            if plot["kind"] == "quality" and artifact.id in plot["artifacts"] and not panel["highlight"]:
                problems.append(f"{where}: {target} does not highlight this card's artifact")
            problems += _series_problems(f"{where}: {target}", panel)
        problems += _table_problems(f"{where}: {target}", plot, body, target)
    shown = set(re.findall(r"!\[[^\]]*\]\((plots/[^)\s]+)\)", body))
    folder = card.path.parent / "plots"
    drawn = sorted(f"plots/{p.name}" for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    problems += [f"{where}: {name} is in plots/ but the card does not show it (a plot without its table)"
                 for name in drawn if name not in shown]
    return problems


def _series_problems(where: str, panel: dict[str, Any]) -> list[str]:
    """Two lines of one panel the tables print alike (two decimals) are one series drawn twice. (An interval
    panel's series are artifacts side by side, each with its own interval: equal deltas stay two.)"""
    values = panel.get("values")
    if not isinstance(values, list) or panel.get("style") != "line":
        return []
    seen: dict[str, str] = {}
    problems = []
    for label, ys in zip(panel["series"], values, strict=False):
        key = repr([None if y is None else round(y, 2) for y in ys])
        if key in seen:
            problems.append(f"{where} draws {label!r} and {seen[key]!r} as two series with the same values: "
                            "draw them once, labelled with both")
        seen.setdefault(key, label)
    return problems


def _table_problems(where: str, plot: dict[str, Any], body: str, target: str) -> list[str]:
    """The plot's section shows its measured table; a load plot leaves out every ITL the table refuses as
    bunched and carries the range wherever the table prints one."""
    section = _section_of(body, target)
    if "<!-- measured:begin -->" not in section:
        return [f"{where} is shown in a section without its measured table (no plot without its table)"]
    if plot["kind"] != "load":
        return []
    problems = []
    cells = _column(section, "ITL median ms")
    refused = sum(cell == "n/a (bunched)" for cell in cells)
    panels = {p["ylabel"]: p for p in plot["panels"]}
    itl = panels.get("ITL median ms", {}).get("values")
    left_out = sum(y is None for ys in itl for y in ys) if isinstance(itl, list) else 0
    if refused > left_out:
        problems.append(f"{where} draws {refused - left_out} inter-token latencies the table refuses as bunched "
                        "('n/a (bunched)'): leave them out, as the table does")
    ranged = any(re.search(r"\(\d[\d.,]*\s*[\u2013-]\s*\d", cell) for cell in _column(section, "Output tok/s (range)"))
    throughput = panels.get("output tok/s", {}).get("ranges")
    if ranged and isinstance(throughput, list) and not any(throughput):
        problems.append(f"{where} draws medians without the repeats' range the table prints: draw it as error bars")
    return problems


def _section_of(body: str, target: str) -> str:
    """The text of the `## ` section that shows `target`, up to the image."""
    at = body.find(f"]({target})")
    start = body.rfind("\n## ", 0, at)
    return body[start + 1 if start >= 0 else 0:at]


def _column(text: str, header: str) -> list[str]:
    """The cells under `header` in every Markdown table of `text` that has that column."""
    cells: list[str] = []
    column = None
    for line in text.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            column = row.index(header) if header in row else -1
        elif column >= 0 and len(row) > column and not set(row[column]) <= set("-: "):
            cells.append(row[column])
    return cells
