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

The rules live by family: numbers and serve commands held to the ledger (`lint/numbers.py`), dates
(`lint/freshness.py`), links (`lint/links.py`), readability and tables (`lint/readability.py`), plots
(`lint/plots.py`), front matter and what the Hub reads (`lint/metadata.py`, and `.eval_results` task ids against
each benchmark's eval.yaml: `lint/benchmarks.py`), hand-written text against
the card's own verdicts (`lint/claims.py`); the card as read back is
`card_text.py`. This module runs them over a family's cards and keeps the template-text check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from pathlib import Path

from hfrelease.cards.card_text import MEASURED, CardText, provenance_table, read_cards
from hfrelease.cards.errors import CardLintError
from hfrelease.cards.inputs import CardInputs
from hfrelease.cards.lint.benchmarks import eval_result_tasks
from hfrelease.cards.lint.claims import claims
from hfrelease.cards.lint.freshness import age
from hfrelease.cards.lint.links import command_paths, links
from hfrelease.cards.lint.metadata import front_matter, metadata
from hfrelease.cards.lint.numbers import expected_numbers, measured_tokens, serve_commands, speed_vs_reference
from hfrelease.cards.lint.plots import plots
from hfrelease.cards.lint.readability import best_agreement, readability
from hfrelease.ledger.store import record_name
from hfrelease.manifest import Manifest

# Template syntax and the usual placeholder words; None/nan/Undefined only as Python prints them (a
# speculative config may well be called "none").
PLACEHOLDER = re.compile(
    r"\{\{|\{%|\{#|(?i:\bTODO\b|\bTBD\b|\bFIXME\b|\bXXX\b|lorem ipsum|<this-repo>|<placeholder>|\[placeholder\])"
    r"|\bNone\b|\bnan\b|\bNaN\b|\bUndefined\b|\binf\b"
)


def lint_cards(manifest: Manifest, cards: Iterable[CardText], *, inputs: CardInputs | None = None,
               today: date | None = None, max_age_days: int | None = None) -> list[str]:
    """Every problem of `cards`; with `inputs`, numbers are re-derived from the ledger and compared."""
    cards = list(cards)
    problems: list[str] = []
    per_card = expected_numbers(inputs) if inputs is not None else None
    expected = {k: v for numbers in per_card.values() for k, v in numbers.items()} if per_card is not None else None
    records = {e.name: e.record.started_at[:10] for e in inputs.records} if inputs is not None else None
    if records is not None and inputs is not None and inputs.changes is not None:
        # "Changes since" cites the older release's records as `<since>:<record>` (hfrelease.cards.changes).
        records |= {f"{inputs.changes.old_label}:{record_name(r.old_record, r.old_record.to_json())}":
                    r.old_record.started_at[:10] for r in inputs.changes.rows}
    since = None
    if inputs is not None and inputs.changes is None:
        since = rendered_since(cards)
    if since is not None:
        # A family is rendered at once: its "Changes since" figures cite the older release's records and every
        # card's speed intervals pool that comparison's session noise. Without it no number can be re-derived:
        # one problem says how to check them, instead of one per number.
        problems.append(f"cards of {manifest.family.name} were rendered with `render --since {since}` (their "
                        f"'Changes since' figures cite {since}'s records, their speed intervals pool that "
                        f"comparison's session noise): numbers not checked; check with `--since {since}`")
    seen: dict[str, tuple[str, str]] = {}  # number id -> (value, card)
    repos = {a.repo for a in manifest.artifact} | {manifest.family.base_model}
    for card in cards:
        where = str(card.path)
        problems += front_matter(manifest, card)
        body = card.text.split("\n---\n", 1)[1] if card.text.startswith("---\n") and "\n---\n" in card.text else ""
        problems += [f"{where}: placeholder or unfilled template text {m!r}" for m in _placeholders(body)]
        table = provenance_table(body)
        values = {value for value, _ in table.values()}
        for block in MEASURED.findall(body):
            for token in measured_tokens(block):
                if token not in values:
                    problems.append(f"{where}: number {token} in a measured block does not trace to a ledger record "
                                    "(it is not in the card's number provenance table)")
        for number_id, (value, names) in table.items():
            other = seen.setdefault(number_id, (value, where))
            if other[0] != value:
                problems.append(f"{where}: {number_id} shows {value} but {other[1]} shows {other[0]} "
                                "(the same measurement must show the same value in every card)")
            if since is not None:
                continue
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
            problems += serve_commands(manifest, card, body, inputs)
        if per_card is not None and since is None:
            problems += speed_vs_reference(manifest, card, table, per_card.get(card.artifact_id, {}))
        problems += age(where, body, table, records, today=today, max_age_days=max_age_days)
        problems += links(where, body, repos, card.path.parent)
        problems += command_paths(where, body)
        problems += readability(manifest, card, body)
        problems += plots(manifest, card, body)
        problems += metadata(manifest, card, body)
        problems += eval_result_tasks(card.path.parent)
        problems += claims(manifest, card, body)
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


def rendered_since(cards: Iterable[CardText]) -> str | None:
    """The release the family's cards were rendered against (`render --since`), or None when no card says."""
    return next((found for card in cards if (found := _rendered_since(card.text)) is not None), None)


def _rendered_since(text: str) -> str | None:
    """The release a card's "Changes since" figures were compared with (their citations are `<since>:<record>`,
    `hfrelease.cards.changes`), or None when the card has none."""
    for number_id, (_, names) in provenance_table(text).items():
        if number_id.startswith("changes."):
            for name in names:
                if ":" in name:
                    return name.split(":", 1)[0]
    return None


def _placeholders(body: str) -> list[str]:
    # A BibTeX block braces an organisation's name twice ({{hfrelease developers}}): BibTeX, not a template.
    body = re.sub(r"^(`{3,})bibtex\n.*?^\1$", "", body, flags=re.S | re.M)
    # `vllm bench serve --request-rate inf` (all requests at once) is vLLM's own spelling, not a Python leftover.
    body = body.replace("--request-rate inf", "--request-rate")
    return [m.group(0) for m in PLACEHOLDER.finditer(body)]


