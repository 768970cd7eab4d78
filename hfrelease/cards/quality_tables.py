"""The quality tables of a card: each accuracy gate's value, its delta against the reference with the
paired-bootstrap interval and n, recovery, and the verdict; the matrix of every gate on every artifact.

Fidelity gates have their own section (`fidelity.py`): their figures are distances, not accuracies.
"""

from __future__ import annotations

from hfrelease.cards.fidelity import accuracy_gates
from hfrelease.cards.measurements import GateResult
from hfrelease.cards.numbers import fixed, signed
from hfrelease.cards.text import Markdown, escape_markdown
from hfrelease.cards.view import CardView, Context
from hfrelease.manifest import Artifact, Gate

_CONFIDENCE = "95%"  # paired_comparison's default, which `hfrelease eval` judges with


class QualityTables:
    """The accuracy figures of a card; each number is registered as it is formatted."""

    def __init__(self, view: CardView) -> None:
        self.view = view
        self.manifest = view.manifest
        self.measured = view.measured
        self.numbers = view.numbers
        # A gate whose every value lies in [0, 1] is a fraction, printed as points (percent).
        self.percent = {g.id: self._is_fraction(g) for g in view.manifest.gate}

    def _is_fraction(self, gate: Gate) -> bool:
        values = [r.value for (_, gid), r in self.measured.gates.items() if gid == gate.id and r.value is not None]
        return bool(values) and all(0.0 <= v <= 1.0 for v in values)

    def _scale(self, gate: Gate) -> tuple[float, int]:
        return (100.0, 1) if self.percent[gate.id] else (1.0, 3)

    def value(self, result: GateResult) -> Markdown:
        assert result.value is not None
        scale, places = self._scale(result.gate)
        return self.numbers.add(f"gate.{result.gate.id}.{result.artifact_id}.value",
                                f"{result.gate.label or result.gate.id} on {result.artifact_id}",
                                fixed(result.value * scale, places), result.entries)

    def delta(self, result: GateResult, unit: str = "") -> Markdown | None:
        """The delta with its interval and n: "-1.0 (CI -3.0 to +0.0, n=100)", or, for a zero-width
        interval, what it means: "+0.0 (all 100 pairs agree)"."""
        c = result.comparison
        if c is None:
            return None
        scale, places = self._scale(result.gate)
        base = f"gate.{result.gate.id}.{result.artifact_id}"
        label = f"{result.gate.label or result.gate.id} on {result.artifact_id} vs the reference"
        delta = self.numbers.add(f"{base}.delta", f"{label}: delta", signed(c.delta * scale, places), result.records)
        n = self.n(result)
        if c.ci_low == c.ci_high:
            # A zero-width bootstrap interval: every paired difference is the same number.
            what = f"all {n} pairs agree" if c.delta == 0 else f"all {n} pairs differ by {delta}"
            return Markdown(f"{delta}{unit} ({what})")
        low = self.numbers.add(f"{base}.ci_low", f"{label}: CI low", signed(c.ci_low * scale, places), result.records)
        high = self.numbers.add(f"{base}.ci_high", f"{label}: CI high", signed(c.ci_high * scale, places),
                                result.records)
        return Markdown(f"{delta}{unit} (CI {low} to {high}, n={n})")

    def recovery(self, result: GateResult) -> Markdown | None:
        """Recovery in percent with its paired-bootstrap interval: "99.0% (97.0 to 100.0)"."""
        c = result.comparison
        if c is None or c.recovery is None or c.recovery_low is None or c.recovery_high is None:
            return None
        base = f"gate.{result.gate.id}.{result.artifact_id}"
        label = f"{result.gate.label or result.gate.id} on {result.artifact_id}: recovery (% of the reference)"
        value = self.numbers.add(f"{base}.recovery", label, fixed(c.recovery * 100, 1), result.records)
        if c.recovery_low == c.recovery_high:
            return Markdown(f"{value}% (all pairs agree)" if c.delta == 0 else f"{value}% (zero-width CI)")
        low = self.numbers.add(f"{base}.recovery_low", f"{label}, CI low", fixed(c.recovery_low * 100, 1),
                               result.records)
        high = self.numbers.add(f"{base}.recovery_high", f"{label}, CI high", fixed(c.recovery_high * 100, 1),
                                result.records)
        return Markdown(f"{value}% ({low} to {high})")

    def n(self, result: GateResult) -> Markdown:
        return self.numbers.add(f"gate.{result.gate.id}.{result.artifact_id}.n",
                                f"{result.gate.label or result.gate.id} on {result.artifact_id}: samples",
                                str(result.entry.record.n), [result.entry])

    def label(self, result: GateResult) -> Markdown:
        """The gate's name; for a gate run under several seeds, with their number (its value is their mean)."""
        label = escape_markdown(result.gate.label or result.gate.id)
        if result.seeds == 1:
            return label
        seeds = self.numbers.add(f"gate.{result.gate.id}.{result.artifact_id}.seeds",
                                 f"{result.gate.label or result.gate.id} on {result.artifact_id}: seeds",
                                 str(result.seeds), result.entries)
        return Markdown(f"{label}, {seeds} seeds")

    def unit(self, gate: Gate) -> str:
        return "points" if self.percent[gate.id] else escape_markdown(gate.metric)

    def verdict(self, result: GateResult) -> Markdown:
        return Markdown("**fail**") if result.verdict == "fail" else escape_markdown(result.verdict)

    def quality(self, artifact: Artifact) -> Context | None:
        gates = [g for g in accuracy_gates(self.manifest) if self.measured.gate(artifact.id, g.id) is not None]
        if artifact.kind == "draft" or not gates:
            return None
        reference = self.manifest.reference
        rows = []
        for gate in gates:
            result = self.measured.gate(artifact.id, gate.id)
            assert result is not None
            ref = self.measured.gate(reference.id, gate.id)
            rows.append(self._quality_row(gate, result, ref))
        thresholds = [escape_markdown(f"{g.label or g.id} {g.min_recovery * 100:g}%")
                      for g in gates if g.min_recovery is not None]
        return {"rows": rows, "confidence": _CONFIDENCE, "is_reference": artifact.kind == "reference",
                "min_recovery": Markdown(", ".join(thresholds)) if thresholds else None}

    def _quality_row(self, gate: Gate, result: GateResult, ref: GateResult | None) -> Context:
        row: Context = {"label": self.label(result), "verdict": self.verdict(result),
                        "void": result.value is None, "reason": escape_markdown(result.reason),
                        "unit": self.unit(gate)}
        if result.value is None:
            return {**row, "value": None, "reference": None, "delta": None, "recovery": None, "n": None}
        ref_value = self.value(ref) if ref is not None and ref.value is not None else None
        return {**row, "value": self.value(result), "reference": ref_value, "delta": self.delta(result),
                "recovery": self.recovery(result), "n": self.n(result)}

    def matrix(self, artifact: Artifact) -> Context | None:
        """Every gate on every shown artifact, one row each (a long table fits any number of gates)."""
        rows = []
        for gate in accuracy_gates(self.manifest):
            for other in self.manifest.artifact:
                result = self.measured.gate(other.id, gate.id)
                if result is None or not self.view.shown(other):
                    continue
                title = escape_markdown(other.title or other.repo)
                row: Context = {"gate": self.label(result),
                                "name": Markdown(f"**{title}**") if other.id == artifact.id else title,
                                "verdict": self.verdict(result), "value": Markdown("void"), "delta": Markdown(""),
                                "recovery": Markdown("")}
                if result.value is not None:
                    row.update(value=self.value(result), delta=self.delta(result) or Markdown(""),
                               recovery=self.recovery(result) or Markdown(""))
                rows.append(row)
        return {"rows": rows} if rows else None

    def gate_results(self, other: Artifact) -> list[GateResult]:
        """`other`'s results on the accuracy gates it was measured on."""
        return [r for g in accuracy_gates(self.manifest) if (r := self.measured.gate(other.id, g.id)) is not None]
