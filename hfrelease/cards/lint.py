"""Card lint: is a rendered card fit to publish? (`hfrelease check --cards`, and before every publish.)

Checks, each reported with the card and the place:

- the front matter parses (huggingface_hub's own parser) and has the required keys;
- no unfilled template syntax or placeholder text;
- every number inside a measured block (`<!-- measured:begin -->`) is a value of the card's number
  provenance table, whose records exist in the ledger and, re-derived from the ledger, give that value;
- the same measurement id shows the same value in every card of the family;
- links to Hub model repos resolve to artifacts of the manifest (or its base model), local links to files;
- the card says when its numbers were measured, and those dates are its records' dates;
- every serve command the card prints as measured (`<!-- serve:begin -->` blocks; a configuration with
  no record yet is printed unmarked, "not measured yet") is the command of a record in the ledger for
  that artifact (or, on a draft's card, its target).

Numbers outside measured blocks (hand-written prose, settings, citations) are not checked: the card
marks what it claims to have measured, and only that is held to the ledger.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard

from hfrelease.cards.errors import CardLintError
from hfrelease.cards.frontmatter import REQUIRED_KEYS
from hfrelease.cards.inputs import CardInputs
from hfrelease.manifest import Manifest

MEASURED = re.compile(r"<!-- measured:begin -->\n(.*?)<!-- measured:end -->", re.S)
PROVENANCE = re.compile(r"<!-- provenance:begin -->\n(.*?)<!-- provenance:end -->", re.S)
AGE = re.compile(r"measured between (\d{4}-\d{2}-\d{2}) and (\d{4}-\d{2}-\d{2})")
NUMBER = re.compile(r"(?<![\w.\\/-])[+-]?\d+(?:\.\d+)?(?![\w.])")
# Template syntax and the usual placeholder words; None/nan/Undefined only as Python prints them (a
# speculative config may well be called "none").
PLACEHOLDER = re.compile(
    r"\{\{|\{%|\{#|(?i:\bTODO\b|\bTBD\b|\bFIXME\b|\bXXX\b|lorem ipsum|<this-repo>|<placeholder>|\[placeholder\])"
    r"|\bNone\b|\bnan\b|\bNaN\b|\bUndefined\b|\binf\b"
)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SERVE = re.compile(r"<!-- serve:begin -->\n(`{3,})\w*\n(.*?)\n\1\n<!-- serve:end -->", re.S)
HUB_LINK = re.compile(r"\]\((https://huggingface\.co/[^)\s]*)\)")
LOCAL_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)")
_NOT_MODELS = {"datasets", "spaces", "collections", "docs", "papers", "blog", "organizations"}


@dataclass(frozen=True, kw_only=True)
class CardText:
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


def lint_cards(manifest: Manifest, cards: Iterable[CardText], *, inputs: CardInputs | None = None,
               today: date | None = None, max_age_days: int | None = None) -> list[str]:
    """Every problem of `cards`; with `inputs`, numbers are re-derived from the ledger and compared."""
    cards = list(cards)
    problems: list[str] = []
    expected = _expected_numbers(inputs) if inputs is not None else None
    records = {e.name: e.record.started_at[:10] for e in inputs.records} if inputs is not None else None
    seen: dict[str, tuple[str, str]] = {}  # number id -> (value, card)
    repos = {a.repo for a in manifest.artifact} | {manifest.family.base_model}
    for card in cards:
        where = str(card.path)
        problems += _front_matter(manifest, card)
        body = card.text.split("\n---\n", 1)[1] if card.text.startswith("---\n") and "\n---\n" in card.text else ""
        problems += [f"{where}: placeholder or unfilled template text {m!r}" for m in _placeholders(body)]
        table = _provenance_table(body)
        values = {value for value, _ in table.values()}
        for block in MEASURED.findall(body):
            for token in _measured_tokens(block):
                if token not in values:
                    problems.append(f"{where}: number {token} in a measured block does not trace to a ledger record "
                                    "(it is not in the card's number provenance table)")
        for number_id, (value, names) in table.items():
            other = seen.setdefault(number_id, (value, where))
            if other[0] != value:
                problems.append(f"{where}: {number_id} shows {value} but {other[1]} shows {other[0]} "
                                "(the same measurement must show the same value in every card)")
            if expected is not None:
                want = expected.get(number_id)
                if want is None:
                    problems.append(f"{where}: {number_id} = {value} is not derived from the current ledger")
                elif want != value:
                    problems.append(f"{where}: {number_id} shows {value} but the ledger gives {want} (stale card)")
            if records is not None:
                problems += [f"{where}: {number_id} cites {n}, which is not in the ledger" for n in names
                             if n not in records]
        if inputs is not None:
            problems += _serve_commands(manifest, card, body, inputs)
        problems += _age(where, body, table, records, today=today, max_age_days=max_age_days)
        problems += _links(where, body, repos, card.path.parent)
    return problems


def check_cards(manifest: Manifest, *, inputs: CardInputs | None = None, family_root: Path | None = None,
                today: date | None = None, max_age_days: int | None = None) -> int:
    """Raise `CardLintError` listing every problem of the family's rendered cards; return how many were checked."""
    cards, problems = read_cards(manifest, family_root)
    problems += lint_cards(manifest, cards, inputs=inputs, today=today, max_age_days=max_age_days)
    if problems:
        raise CardLintError(problems)
    return len(cards)


def _expected_numbers(inputs: CardInputs) -> dict[str, str]:
    from hfrelease.cards.context import build_context
    from hfrelease.cards.measurements import measure_family

    measured = measure_family(inputs)
    expected: dict[str, str] = {}
    for artifact in inputs.manifest.artifact:
        _, numbers, _ = build_context(inputs, measured, artifact)
        expected.update({row.id: row.text for row in numbers.rows})
    return expected


def _front_matter(manifest: Manifest, card: CardText) -> list[str]:
    where = str(card.path)
    if not card.text.startswith("---\n"):
        return [f"{where}: no YAML front matter"]
    try:
        data: dict[str, Any] = ModelCard(card.text, ignore_metadata_errors=False).data.to_dict()  # type: ignore[no-untyped-call]
    except Exception as exc:  # huggingface_hub raises ValueError or yaml errors; either way it is unusable
        return [f"{where}: front matter does not parse: {exc}"]
    problems = [f"{where}: front matter lacks {key!r}" for key in REQUIRED_KEYS if not data.get(key)]
    artifact = manifest.artifact_by_id(card.artifact_id)
    if artifact.kind != "reference" and not data.get("base_model"):
        problems.append(f"{where}: front matter lacks 'base_model'")
    if artifact.kind == "quant" and data.get("base_model_relation") != "quantized":
        problems.append(f"{where}: a quant's base_model_relation must be 'quantized'")
    return problems


def _placeholders(body: str) -> list[str]:
    return [m.group(0) for m in PLACEHOLDER.finditer(body)]


def _cells(line: str) -> list[str]:
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return re.split(r"(?<!\\)\|", inner)


def _measured_tokens(block: str) -> list[str]:
    tokens: list[str] = []
    header_pending = True
    for line in block.splitlines():
        text = CODE_SPAN.sub(" ", line)
        text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets are not numbers
        if text.strip().startswith("|"):
            if header_pending or re.fullmatch(r"[|\s:-]+", text.strip()):
                header_pending = False
                continue
            cells = _cells(text)[1:]  # the first cell names the row
            tokens += [t for cell in cells for t in NUMBER.findall(cell)]
        else:
            header_pending = True
            tokens += NUMBER.findall(re.sub(r"^\s*[-*]\s", "", text))
    return tokens


def _provenance_table(body: str) -> dict[str, tuple[str, list[str]]]:
    table: dict[str, tuple[str, list[str]]] = {}
    for block in PROVENANCE.findall(body):
        for line in block.splitlines()[2:]:
            cells = [c.strip() for c in _cells(line)]
            if len(cells) != 4:
                continue
            number_id = cells[0].strip("`")
            names = [m.group(2) for m in CODE_SPAN.finditer(cells[3])]
            table[number_id] = (cells[2], names)
    return table


def _serve_commands(manifest: Manifest, card: CardText, body: str, inputs: CardInputs) -> list[str]:
    """Problems with the serve commands a card prints: each must be a recorded measurement's command."""
    import shlex

    artifact = manifest.artifact_by_id(card.artifact_id)
    server = artifact.draft.target if artifact.draft is not None else artifact.id
    recorded = {tuple(shlex.split(e.record.serve.display)) for e in inputs.records if e.record.artifact_id == server}
    problems = []
    for _, block in SERVE.findall(body):
        try:
            words = tuple(shlex.split(block.replace("\\\n", " ")))
        except ValueError as exc:
            problems.append(f"{card.path}: a serve command does not parse as a shell command ({exc})")
            continue
        if words not in recorded:
            problems.append(f"{card.path}: the serve command `{' '.join(words)}` is not the command of any "
                            f"recorded measurement of {server}")
    return problems


def _age(where: str, body: str, table: dict[str, tuple[str, list[str]]], records: dict[str, str] | None, *,
         today: date | None, max_age_days: int | None) -> list[str]:
    if not table:
        return []
    match = AGE.search(body)
    if match is None:
        return [f"{where}: the card does not say when its numbers were measured"]
    problems = []
    if records is not None:
        dates = sorted(records[n] for _, names in table.values() for n in names if n in records)
        if dates and (dates[0], dates[-1]) != match.groups():
            problems.append(f"{where}: says measured between {match.group(1)} and {match.group(2)}, "
                            f"its records say {dates[0]} and {dates[-1]}")
    if today is not None and max_age_days is not None:
        age = (today - date.fromisoformat(match.group(1))).days
        if age > max_age_days:
            problems.append(f"{where}: its oldest number is {age} days old (limit {max_age_days})")
    return problems


def _links(where: str, body: str, repos: set[str], directory: Path) -> list[str]:
    problems = []
    for url in HUB_LINK.findall(body):
        parts = url.removeprefix("https://huggingface.co/").split("/")
        if parts[0] in _NOT_MODELS or len(parts) < 2:
            continue
        repo = "/".join(parts[:2])
        if repo not in repos:
            problems.append(f"{where}: link to {url} is not an artifact of the family (dangling cross-link)")
    for target in LOCAL_LINK.findall(body):
        if ".." in target.split("/") or not (directory / target).is_file():
            problems.append(f"{where}: link to {target} does not resolve to a file of the card")
    return problems
