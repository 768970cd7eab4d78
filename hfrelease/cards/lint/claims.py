"""The lint's rules on hand-written text (issue 25, part 2): a card's sections/ prose is held to the
verdicts its own measured tables print.

- A claim of quality ("recommended", "no measurable loss", "lossless quality", ...) in a card one of whose
  gates fails (its quality or fidelity table, or a draft's gate table, says "fail").
- A configuration the hand text calls best, fastest or recommended (named as a code span, `ngram`) that no
  speed table of the card marks best, or that another config beats on the workload the sentence names.

Hand-written text is what the render wraps in `<!-- hand:begin -->` / `<!-- hand:end -->` (each section
of model_cards/<family>/sections/); the generated text around it is the render's and is held to the
ledger by the other rules.
"""

from __future__ import annotations

import re

from hfrelease.cards.card_text import MEASURED, CardText, cells
from hfrelease.cards.lint.readability import visible
from hfrelease.manifest import Manifest

HAND = re.compile(r"<!-- hand:begin -->\n(.*?)\n<!-- hand:end -->", re.S)
CLAIM = re.compile(
    r"\brecommended (?:serving |default )?(?:artifact|quant\w*|checkpoint|model|choice|variant|version|pick)\b"
    r"|\b(?:is|are) (?:the |our )?recommended\b|\bwe recommend (?:it|this)\b"
    r"|\bno (?:measurable |detectable |significant )?(?:quality |accuracy )?(?:loss|degradation)\b"
    r"|\blossless (?:quality|quantization)\b|\bnear[- ]lossless\b|\bmatches the (?:reference|original)\b"
    r"|\bbest choice\b|\bsafe (?:default|choice)\b",
    re.I,
)
BEST = re.compile(r"\b(?:best|fastest|recommended|wins?)\b", re.I)
_CODE = re.compile(r"`([^`\n]+)`")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(\[])|\n\s*[-*]\s+|\n{2,}")


def hand_text(body: str) -> list[str]:
    """The hand-written passages of a card body, as the render marked them."""
    return HAND.findall(body)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def failing_gates(body: str) -> list[str]:
    """The gates this card's measured tables say it fails: a table whose last column is a verdict, each
    row of this card's artifact (the bold one where the table lists several) whose verdict is "fail"."""
    failed: list[str] = []
    for block in MEASURED.findall(body):
        rows = [cells(line.strip()) for line in block.splitlines()
                if line.strip().startswith("|") and not re.fullmatch(r"[|\s:-]+", line.strip())]
        if not rows or not rows[0] or visible(rows[0][-1]).lower() not in {"verdict", "draft gate verdict"}:
            continue
        header = [visible(c) for c in rows[0]]
        artifact_col = header.index("Artifact") if "Artifact" in header else None
        for row in rows[1:]:
            if len(row) != len(header) or not visible(row[-1]).lower().startswith("fail"):
                continue
            if artifact_col is not None and "**" not in row[artifact_col]:
                continue  # another artifact's row of a family table
            gate = next((visible(row[i]) for i in range(len(row) - 1) if i != artifact_col and visible(row[i])), "")
            if gate not in failed:
                failed.append(gate)
    return failed


def best_marks(body: str) -> dict[str, set[str]]:
    """Per speed table of the card (its `###` workload heading), the configs it marks best."""
    marks: dict[str, set[str]] = {}
    heading = ""
    for part in re.split(r"^(### .*)$", body, flags=re.M):
        if part.startswith("### "):
            heading = part[4:].strip()
            continue
        for block in MEASURED.findall(part):
            lines = [line.strip() for line in block.splitlines() if line.strip().startswith("|")]
            if not lines or visible(cells(lines[0])[0]) != "Config" or "Best" not in map(visible, cells(lines[0])):
                continue
            best_col = [visible(c) for c in cells(lines[0])].index("Best")
            marked = marks.setdefault(heading, set())
            for line in lines[2:]:
                row = cells(line)
                if len(row) > best_col and visible(row[best_col]) == "best":
                    marked.add(visible(row[0]))
    return marks


def claims(manifest: Manifest, card: CardText, body: str) -> list[str]:
    """Every problem of the card's hand-written text against its own verdicts."""
    where = str(card.path)
    problems: list[str] = []
    failed = failing_gates(body)
    configs = {s.id for s in manifest.speculative} | {"none"}
    marks = best_marks(body)
    labels = {w.label or w.id: w.id for w in manifest.workload}
    for passage in hand_text(body):
        for sentence in sentences(passage):
            short = sentence if len(sentence) <= 120 else sentence[:117] + "..."
            claim = CLAIM.search(sentence)
            if claim and failed:
                problems.append(f"{where}: hand-written text claims {claim.group(0)!r} ({short!r}) but this card's "
                                f"tables say it fails {', '.join(failed)}: correct the section in sections/")
            if not BEST.search(sentence):
                continue
            for config in (c for c in _CODE.findall(sentence) if c in configs):
                named = [label for label in labels if label in sentence and label in marks]
                tables = {label: marks[label] for label in named} if named else marks
                if not tables or any(config in best for best in tables.values()):
                    continue
                won = "; ".join(f"{label}: {', '.join(f'`{b}`' for b in sorted(best)) or 'none marked best'}"
                                for label, best in tables.items())
                problems.append(f"{where}: hand-written text calls `{config}` best ({short!r}) but the card's speed "
                                f"tables do not mark it best ({won}): correct the section in sections/")
    return problems
