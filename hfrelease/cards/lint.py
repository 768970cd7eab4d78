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
from hfrelease.ledger.store import record_name
from hfrelease.manifest import Manifest

MEASURED = re.compile(r"<!-- measured:begin -->\n(.*?)<!-- measured:end -->", re.S)
PROVENANCE = re.compile(r"<!-- provenance:begin -->\n(.*?)<!-- provenance:end -->", re.S)
AGE = re.compile(r"measured (?:on (\d{4}-\d{2}-\d{2})|between (\d{4}-\d{2}-\d{2}) and (\d{4}-\d{2}-\d{2}))")
PROVENANCE_ROW = re.compile(r"^- `([^`]+)` = (\S+): .*; ((?:`[^`]+`(?:, )?)+)$")
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
    per_card = _expected_numbers(inputs) if inputs is not None else None
    expected = {k: v for numbers in per_card.values() for k, v in numbers.items()} if per_card is not None else None
    records = {e.name: e.record.started_at[:10] for e in inputs.records} if inputs is not None else None
    if records is not None and inputs is not None and inputs.changes is not None:
        # "Changes since" cites the older release's records as `<since>:<record>` (hfrelease.cards.changes).
        records |= {f"{inputs.changes.old_label}:{record_name(r.old_record, r.old_record.to_json())}":
                    r.old_record.started_at[:10] for r in inputs.changes.rows}
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
        if per_card is not None:
            problems += _speed_vs_reference(manifest, card, table, per_card.get(card.artifact_id, {}))
        problems += _age(where, body, table, records, today=today, max_age_days=max_age_days)
        problems += _links(where, body, repos, card.path.parent)
        problems += readability(manifest, card, body)
        problems += plots(manifest, card, body)
        problems += metadata(manifest, card, body)
    problems += best_agreement(manifest, cards)
    return problems


def check_cards(manifest: Manifest, *, inputs: CardInputs | None = None, family_root: Path | None = None,
                today: date | None = None, max_age_days: int | None = None) -> int:
    """Raise `CardLintError` listing every problem of the family's rendered cards; return how many were checked."""
    cards, problems = read_cards(manifest, family_root)
    problems += lint_cards(manifest, cards, inputs=inputs, today=today, max_age_days=max_age_days)
    if problems:
        raise CardLintError(problems)
    return len(cards)


def _expected_numbers(inputs: CardInputs) -> dict[str, dict[str, str]]:
    """Per artifact, the numbers its card shows when rendered from the ledger now (id -> text)."""
    from hfrelease.cards.context import build_context
    from hfrelease.cards.measurements import measure_family

    measured = measure_family(inputs)
    expected: dict[str, dict[str, str]] = {}
    for artifact in inputs.manifest.artifact:
        _, numbers, _ = build_context(inputs, measured, artifact)
        expected[artifact.id] = {row.id: row.text for row in numbers.rows}
    return expected


def _speed_vs_reference(manifest: Manifest, card: CardText, table: dict[str, tuple[str, list[str]]],
                        expected: dict[str, str]) -> list[str]:
    """A quant card states its decode speed over the reference's wherever the ledger holds both points
    without speculation: a card rendered before those records (its family table "not measured") is stale."""
    if manifest.artifact_by_id(card.artifact_id).kind != "quant":
        return []
    prefix = re.compile(rf"^speed\.([^.]+)\.{re.escape(card.artifact_id)}\.none\.c\d+\.vs_reference$")
    return [f"{card.path}: states no decode speed against the reference on workload {m.group(1)!r}, though the "
            f"ledger holds both points without speculation ({number_id} = {value}): re-render the card"
            for number_id, value in expected.items() if (m := prefix.match(number_id)) and number_id not in table]


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
    # A BibTeX block braces an organisation's name twice ({{hfrelease developers}}): BibTeX, not a template.
    body = re.sub(r"^(`{3,})bibtex\n.*?^\1$", "", body, flags=re.S | re.M)
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
    oldest, newest = (match.group(1), match.group(1)) if match.group(1) else (match.group(2), match.group(3))
    if records is not None:
        dates = sorted(records[n] for _, names in table.values() for n in names if n in records)
        if dates and (dates[0], dates[-1]) != (oldest, newest):
            problems.append(f"{where}: says measured {oldest} to {newest}, its records say {dates[0]} and {dates[-1]}")
    if today is not None and max_age_days is not None:
        age = (today - date.fromisoformat(oldest)).days
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


# -- readability rules (issue 13): each catches one defect a reader met in a rendered card ------------------

# The Hub shows a model card in a column about 730 px wide at a 1200 px window; at the 14 px of its table
# text a character is about 7 px, so a table of about 100 characters fits. A table's width is measured as
# the sum, over its columns, of the column's need plus 3 characters of padding and border: a column needs
# its longest unbreakable word (what would overflow and scroll; browsers break lines at spaces and after
# hyphens, UAX #14) or half its widest cell (a cell may wrap onto two lines, not the 4 to 8 a name wrapped
# onto in a 12-column table), whichever is more.
MAX_TABLE_WIDTH = 100
_MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)|\*\*|`+|\\(?=[^\w\s])|<br>")
_SPEEDUP = re.compile(r"(\d+\.\d+)\u00d7")
_RANGE = re.compile(r"\(\d+(?:\.\d+)?\u2013\d+(?:\.\d+)?\)|\(1 run\)")
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
                current.append([visible(c) for c in _cells(stripped)])
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
        for label, best in re.findall(r"^### (.+)\n\n[^\n]*best config: `([^`]+)`", card.text, re.M):
            other = seen.setdefault((server, label), (best, str(card.path)))
            if other[0] != best:
                problems.append(f"{card.path}: calls `{best}` the best config for {label} on {server}, "
                                f"but {other[1]} calls `{other[0]}` best")
    return problems


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


_EVAL_KEYS = {"dataset", "value", "date", "source", "notes", "verifyToken"}
_EVAL_DATASET_KEYS = {"id", "task_id", "revision"}


def metadata(manifest: Manifest, card: CardText, body: str) -> list[str]:
    """What the Hub reads: an explicit base-model relation, Hub-style metric ids on the body's scale, the
    right library, `.eval_results` in the documented schema, and citations that agree and name
    organisations as organisations."""
    import yaml

    where, problems = str(card.path), []
    artifact = manifest.artifact_by_id(card.artifact_id)
    try:
        data: dict[str, Any] = ModelCard(card.text, ignore_metadata_errors=False).data.to_dict()  # type: ignore[no-untyped-call]
    except Exception:  # reported by _front_matter
        return []
    if data.get("base_model") and not data.get("base_model_relation"):
        problems.append(f"{where}: base_model without base_model_relation: the Hub would guess the relation")
    if artifact.draft is not None and artifact.draft.method in {"eagle", "eagle3", "mtp"} \
            and data.get("library_name") == "transformers":
        problems.append(f"{where}: library_name transformers on a {artifact.draft.method} head, which transformers "
                        "cannot load on its own")
    shown = {value for number_id, (value, _) in _provenance_table(body).items()
             if number_id.startswith("gate.") and number_id.endswith(f".{artifact.id}.value")}
    for index in data.get("model-index") or []:
        for result in index.get("results", []):
            for metric in result.get("metrics", []):
                if "," in str(metric.get("type", "")):
                    problems.append(f"{where}: model-index metric type {metric['type']!r} is an lm-eval key, "
                                    "not a Hub metric id")
                if not _on_scale(metric.get("value"), shown, points="percentages for metrics in [0, 1]" in body):
                    problems.append(f"{where}: model-index value {metric.get('value')!r} is not on the scale the "
                                    "card's tables print")
    directory = card.path.parent
    for path in sorted((directory / ".eval_results").glob("*.yaml")):
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, dict) or set(entry) - _EVAL_KEYS or not isinstance(entry.get("dataset"), dict) \
                    or set(entry["dataset"]) - _EVAL_DATASET_KEYS or "id" not in entry["dataset"] \
                    or not isinstance(entry.get("value"), int | float):
                problems.append(f"{path}: not the Hub's .eval_results schema (dataset.id, task_id, value, date, "
                                "source, notes)")
            elif not _on_scale(entry["value"], shown, points="percentages for metrics in [0, 1]" in body):
                problems.append(f"{path}: value {entry['value']!r} is not on the scale the card's tables print")
    problems += _citation_files(manifest, directory)
    return problems


def _on_scale(value: object, shown: set[str], *, points: bool) -> bool:
    """Whether a metadata value is one the card's tables print (its provenance values); without them, a
    fraction on a card that prints points is off the scale."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    if not shown:
        return not (points and 0.0 <= value <= 1.0)
    return any(abs(float(text) - value) < 0.051 for text in shown if re.fullmatch(r"-?\d+(\.\d+)?", text))


def _citation_files(manifest: Manifest, directory: Path) -> list[str]:
    """CITATION.cff and citation.bib cite the same work, organisations stay one name, no dead repo link."""
    import yaml

    cff_path, bib_path = directory / "CITATION.cff", directory / "citation.bib"
    if not cff_path.is_file() or not bib_path.is_file():
        return []
    problems = []
    cff = yaml.safe_load(cff_path.read_text(encoding="utf-8"))
    bib = bib_path.read_text(encoding="utf-8")
    first = bib.split("\n\n@", 1)[0]
    fields = dict(re.findall(r"^\s+(\w+)\s+= \{(.*)\},?$", first, re.M))
    preferred = cff.get("preferred-citation", {}) if isinstance(cff, dict) else {}
    if isinstance(cff, dict) and preferred.get("url") != cff.get("url") \
            and not str(preferred.get("title", "")).startswith(str(cff.get("title"))):
        problems.append(f"{cff_path}: describes {cff.get('title')!r} but its preferred citation is "
                        f"{preferred.get('title')!r}: each artifact is cited as itself")
    if preferred.get("title") != fields.get("title") or preferred.get("url") != fields.get("url"):
        problems.append(f"{cff_path}: cites {preferred.get('title')!r} ({preferred.get('url')}) but citation.bib's "
                        f"first entry cites {fields.get('title')!r} ({fields.get('url')})")
    for author in manifest.family.authors:
        if not author.entity:
            continue
        people = cff.get("authors", []) if isinstance(cff, dict) else []
        if not any(isinstance(p, dict) and p.get("name") == author.name for p in people):
            problems.append(f"{cff_path}: the organisation {author.name!r} is not a CFF entity (name), "
                            "it reads as a person")
        if f"{{{{{author.name}}}}}" not in bib:
            problems.append(f"{bib_path}: the organisation {author.name!r} is not braced: BibTeX splits it")
    sources = {a.source.hub for a in manifest.artifact if a.source.hub} | {manifest.family.base_model}
    dead = {f"https://huggingface.co/{a.repo}" for a in manifest.artifact if not a.publish and a.repo not in sources}
    text = cff_path.read_text(encoding="utf-8") + bib
    problems += [f"{directory}: the citation links {url}, a repo this release never publishes" for url in sorted(dead)
                 if re.search(re.escape(url) + r"(?![\w-])", text)]
    return problems
