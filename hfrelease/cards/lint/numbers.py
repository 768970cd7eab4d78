"""The lint's rules that hold what a card claims as measured to the ledger: every number in a measured
block is in the card's number provenance list and, re-derived from the ledger, gives that value; a quant
card states its output throughput against the reference where the ledger can; every serve command it prints
as measured is a recorded measurement's command.
"""

from __future__ import annotations

import re

from hfrelease.cards.card_text import CODE_SPAN, CardText, cells
from hfrelease.cards.inputs import CardInputs
from hfrelease.manifest import Manifest

NUMBER = re.compile(r"(?<![\w.\\/-])[+-]?\d+(?:\.\d+)?(?![\w.])")
SERVE = re.compile(r"<!-- serve:begin -->\n(`{3,})\w*\n(.*?)\n\1\n<!-- serve:end -->", re.S)


def expected_numbers(inputs: CardInputs) -> dict[str, dict[str, str]]:
    """Per artifact, the numbers its card shows when rendered from the ledger now (id -> text)."""
    from hfrelease.cards.context import build_context
    from hfrelease.cards.measurements import measure_family

    measured = measure_family(inputs)
    expected: dict[str, dict[str, str]] = {}
    for artifact in inputs.manifest.artifact:
        _, numbers, _ = build_context(inputs, measured, artifact)
        expected[artifact.id] = {row.id: row.text for row in numbers.rows}
    return expected


def speed_vs_reference(manifest: Manifest, card: CardText, table: dict[str, tuple[str, list[str]]],
                        expected: dict[str, str]) -> list[str]:
    """A quant card states its output throughput over the reference's wherever the ledger holds both points
    without speculation: a card rendered before those records (its family table "not measured") is stale."""
    if manifest.artifact_by_id(card.artifact_id).kind != "quant":
        return []
    prefix = re.compile(rf"^speed\.([^.]+)\.{re.escape(card.artifact_id)}\.none\.c\d+\.vs_reference$")
    return [f"{card.path}: states no output throughput against the reference on workload {m.group(1)!r}, though the "
            f"ledger holds both points without speculation ({number_id} = {value}): re-render the card"
            for number_id, value in expected.items() if (m := prefix.match(number_id)) and number_id not in table]


def measured_tokens(block: str) -> list[str]:
    """The numbers of a measured block a reader takes for measurements: table cells but the row's name
    and the header, list items' text; code spans and link targets are not numbers."""
    tokens: list[str] = []
    header_pending = True
    for line in block.splitlines():
        text = CODE_SPAN.sub(" ", line)
        text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets are not numbers
        if text.strip().startswith("|"):
            if header_pending or re.fullmatch(r"[|\s:-]+", text.strip()):
                header_pending = False
                continue
            row = cells(text)[1:]  # the first cell names the row
            tokens += [t for cell in row for t in NUMBER.findall(cell)]
        else:
            header_pending = True
            tokens += NUMBER.findall(re.sub(r"^\s*[-*]\s", "", text))
    return tokens


def serve_commands(manifest: Manifest, card: CardText, body: str, inputs: CardInputs) -> list[str]:
    """Problems with the serve commands a card prints: each must be a recorded measurement's command."""
    import shlex

    from hfrelease.cards.reproduce import unfold

    artifact = manifest.artifact_by_id(card.artifact_id)
    server = artifact.draft.target if artifact.draft is not None else artifact.id
    recorded = {tuple(shlex.split(e.record.serve.display)) for e in inputs.records if e.record.artifact_id == server}
    problems = []
    for _, block in SERVE.findall(body):
        try:
            words = tuple(unfold(block))
        except ValueError as exc:
            problems.append(f"{card.path}: a serve command does not parse as a shell command ({exc})")
            continue
        if words not in recorded:
            problems.append(f"{card.path}: the serve command `{' '.join(words)}` is not the command of any "
                            f"recorded measurement of {server}")
    return problems
