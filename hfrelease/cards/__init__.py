"""Model cards from recorded results: manifest + ledger + hand-written sections + templates → cards.

    inputs = read_inputs(manifest)              # the only reads (ledger, sections/, declared files)
    family = render_family(inputs)              # pure: bytes per file of each card directory
    apply_changes(plan_changes(family, root))   # write (or `unified_diff` them for --diff)
    check_cards(manifest, inputs=inputs)        # lint before publishing
"""

from hfrelease.cards.card_text import read_cards
from hfrelease.cards.errors import CardError, CardLintError, MissingMeasurementError
from hfrelease.cards.inputs import CardInputs, RecordEntry, entry_for, read_inputs
from hfrelease.cards.lint import check_cards, lint_cards
from hfrelease.cards.render import RenderedCard, RenderedFamily, render_family
from hfrelease.cards.write import apply_changes, plan_changes, unified_diff

__all__ = [
    "CardError",
    "CardInputs",
    "CardLintError",
    "MissingMeasurementError",
    "RecordEntry",
    "RenderedCard",
    "RenderedFamily",
    "apply_changes",
    "check_cards",
    "entry_for",
    "lint_cards",
    "plan_changes",
    "read_cards",
    "read_inputs",
    "render_family",
    "unified_diff",
]
