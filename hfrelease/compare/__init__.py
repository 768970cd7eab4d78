"""`hfrelease compare`: what changed between two ledgers of one family, with the evidence for each change.

`sides` reads each side (a ledger directory, a git ref, a release tag on the Hub) into a checked copy;
`rows` matches their measurements and compares them; `report` writes the JSON and Markdown forms.
"""

from hfrelease.compare.family import compare_family
from hfrelease.compare.report import comparison_json, comparison_markdown
from hfrelease.compare.rows import ChangedInput, ComparedRow, FamilyComparison, OneSidedRow, compare_ledgers
from hfrelease.compare.sides import LedgerSide, read_side

__all__ = [
    "ChangedInput",
    "ComparedRow",
    "FamilyComparison",
    "LedgerSide",
    "OneSidedRow",
    "compare_family",
    "compare_ledgers",
    "comparison_json",
    "comparison_markdown",
    "read_side",
]
