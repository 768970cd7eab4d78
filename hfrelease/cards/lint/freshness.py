"""The lint's freshness rule: a card says when its numbers were measured, those are its records' dates,
and (with a limit) its oldest number is not older than the limit.
"""

from __future__ import annotations

import re
from datetime import date

AGE = re.compile(r"measured (?:on (\d{4}-\d{2}-\d{2})|between (\d{4}-\d{2}-\d{2}) and (\d{4}-\d{2}-\d{2}))")


def age(where: str, body: str, table: dict[str, tuple[str, list[str]]], records: dict[str, str] | None, *,
         today: date | None, max_age_days: int | None) -> list[str]:
    """Problems with when a card says its numbers (`table`, its provenance list) were measured."""
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
        days = (today - date.fromisoformat(oldest)).days
        if days > max_age_days:
            problems.append(f"{where}: its oldest number is {days} days old (limit {max_age_days})")
    return problems
