"""The Fidelity section of a card: each fidelity gate's KL and top-1 flips against the reference.

Kept apart from the quality tables (`quality_tables.py`), whose deltas, points and recovery describe accuracy:
a fidelity gate's figures are distances from the reference (0 is identical), judged against `max_kl` /
`max_flip_rate` by the same verdict function `hfrelease eval` uses (`hfrelease.verdicts.verdict`).
Every number is registered with the records it comes from, so `check --cards` traces it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hfrelease.cards.measurements import FamilyMeasurements, GateResult
from hfrelease.cards.numbers import NumberRegistry, fixed
from hfrelease.cards.text import Markdown, escape_markdown
from hfrelease.errors import MeasurementError
from hfrelease.manifest import Artifact, Gate, Manifest
from hfrelease.verdicts.comparison import Comparison
from hfrelease.verdicts.verdict import judge_samples

Context = dict[str, Any]

APPROXIMATION = ("KL is computed on the tokens both sides report (each side's top-k prompt logprobs and the "
                 "scored token) plus one bucket for the rest of each side's probability: a lower bound of the "
                 "true KL, exact when those tokens carry all the mass.")


def accuracy_gates(manifest: Manifest) -> list[Gate]:
    """The gates the quality tables show: every gate but the fidelity gates (shown in their own section)."""
    return [g for g in manifest.gate if not g.is_fidelity]


def fidelity_context(
    manifest: Manifest, measured: FamilyMeasurements, numbers: NumberRegistry, card: Artifact,
    *, shown: Callable[[Artifact], bool],
) -> Context | None:
    """Rows of every fidelity gate on every shown artifact but the reference (this card's in bold); with
    several fidelity gates the rows follow the gates' order."""
    rows: list[Context] = []
    for gate in (g for g in manifest.gate if g.is_fidelity):
        for other in manifest.artifact:
            result = measured.gate(other.id, gate.id)
            if result is None or other.id == manifest.reference.id or not shown(other):
                continue
            row = _row(gate, other, result, numbers, bold=other.id == card.id)
            if sum(g.is_fidelity for g in manifest.gate) > 1:  # the gate goes where a Gate column would
                row["name"] = Markdown(f"{row['name']} ({row['gate']})")
            rows.append(row)
    if not rows:
        return None
    gates = [escape_markdown(g.label or g.id) for g in manifest.gate if g.is_fidelity]
    return {"rows": rows, "approximation": APPROXIMATION, "gates": Markdown(", ".join(gates)),
            "reference": escape_markdown(manifest.reference.title or manifest.reference.repo)}


def _row(gate: Gate, other: Artifact, result: GateResult, numbers: NumberRegistry, *, bold: bool) -> Context:
    title = escape_markdown(other.repo.split("/")[1])  # the repo's short name keeps the table in the column
    row: Context = {"gate": escape_markdown(gate.label or gate.id), "name": Markdown(f"**{title}**") if bold else title,
                    "verdict": Markdown("**fail**") if result.verdict == "fail" else escape_markdown(result.verdict),
                    "reason": escape_markdown(result.reason), "void": result.value is None,
                    "kl": None, "flips": None, "divergence": None, "n": None}
    if result.value is None or result.reference is None:
        return row
    try:
        checks = dict(judge_samples(gate, result.entry.samples, result.reference.samples).checks)
    except (MeasurementError, ValueError):
        return row
    base, label = f"fidelity.{gate.id}.{other.id}", f"{gate.label or gate.id} on {other.id}"
    records = result.records
    if "kl" in checks:
        row["kl"] = _interval(numbers, f"{base}.kl", f"{label}: mean KL (nats/token)", checks["kl"], records, 4)
    if "flip_rate" in checks:
        row["flips"] = _interval(numbers, f"{base}.flips", f"{label}: top-1 flip rate (%)", checks["flip_rate"],
                                 records, 1, scale=100.0, suffix="%")
    first = result.entry.record.metrics.get("first_divergence")
    diverged = result.entry.record.metrics.get("diverged")
    if diverged is not None:
        share = numbers.add(f"{base}.diverged", f"{label}: prompts whose top-1 token ever differs (%)",
                            fixed(diverged.value * 100, 0), [result.entry])
        at = (numbers.add(f"{base}.first_divergence", f"{label}: mean first divergence position",
                          fixed(first.value, 1), [result.entry]) if first is not None else None)
        row["divergence"] = Markdown(f"{share}%" + (f" (token {at})" if at else ""))
    row["n"] = numbers.add(f"{base}.n", f"{label}: prompts", str(result.entry.record.n), [result.entry])
    return row


def _interval(numbers: NumberRegistry, number_id: str, label: str, comparison: Comparison, records: Any,
              places: int, *, scale: float = 1.0, suffix: str = "") -> Markdown:
    # The comparison is reference - artifact (lower is better): the artifact's figure is its own mean, and
    # the interval of its excess over the reference's self-score (0) is (-ci_high, -ci_low).
    mean = numbers.add(number_id, label, fixed(comparison.artifact_mean * scale, places), records)
    low_text, high_text = fixed(-comparison.ci_high * scale, places), fixed(-comparison.ci_low * scale, places)
    if low_text == high_text:
        # "0.0 to 0.0" reads like a typo (and check --cards refuses it): say what a zero-width interval means.
        what = "every prompt agrees" if comparison.artifact_mean == 0 else "interval narrower than the last digit"
        return Markdown(f"{mean}{suffix} ({what})")
    low = numbers.add(f"{number_id}_low", f"{label}, CI low", low_text, records)
    high = numbers.add(f"{number_id}_high", f"{label}, CI high", high_text, records)
    return Markdown(f"{mean}{suffix} ({low} to {high})")
