"""The lint's plot rule: each plot a card shows carries its description (a PNG text chunk written by
`plots.py`), and reads as the tables do.
"""

from __future__ import annotations

import re

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
    return problems
