"""Manifest + measurements → the plain data a card template prints. All number formatting happens here.

The context is made of dicts, lists and `Markdown` strings only: templates do no arithmetic and no
formatting, and every string that came from a manifest or a ledger is escaped before it gets here (the
template environment escapes anything that is not `Markdown` anyway).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hfrelease.cards import citation
from hfrelease.cards.changes import changes_context
from hfrelease.cards.commands import download_command, serving_context
from hfrelease.cards.fidelity import accuracy_gates, fidelity_context
from hfrelease.cards.inputs import FAMILY, SECTION_NAMES, CardInputs
from hfrelease.cards.measurements import NONE, FamilyMeasurements, GateResult, SpeedPoint
from hfrelease.cards.memory import figures as memory_figures
from hfrelease.cards.numbers import NumberRegistry, binary_size, fixed, signed
from hfrelease.cards.plots import PlotData, plan_plots
from hfrelease.cards.text import Markdown, code_block, code_span, escape_markdown, hub_url, link, prose
from hfrelease.cards.training import training_context
from hfrelease.manifest import Artifact, Gate, Manifest, Workload

Context = dict[str, Any]
_CONFIDENCE = "95%"
TIMES = "\u00d7"  # the multiplication sign of "1.6 times faster"
DASH = "\u2013"  # en dash of date ranges  # paired_comparison's default, which `hfrelease eval` judges with


def build_context(
    inputs: CardInputs, measured: FamilyMeasurements, artifact: Artifact
) -> tuple[Context, NumberRegistry, list[PlotData]]:
    """The template context of `artifact`'s card, the numbers it prints, and the plots it shows."""
    manifest = inputs.manifest
    numbers = NumberRegistry()
    view = _View(manifest, measured, numbers, artifact, inputs.sections)
    plots = plan_plots(manifest, measured, artifact)
    context: Context = {
        "artifact": _artifact(manifest, artifact),
        "family": _family(manifest),
        "headline": view.headline(artifact),
        "quality": view.quality(artifact),
        "fidelity": fidelity_context(manifest, measured, numbers, artifact, shown=view.shown),
        "changes": changes_context(inputs.changes, numbers, artifact),
        "matrix": view.matrix(artifact),
        "speed": view.speed(artifact),
        "load": view.load(artifact),
        "sweep": view.sweep(artifact),
        "pairings": view.pairings(artifact),
        "acceptance": view.acceptance(artifact),
        "serving": serving_context(manifest, measured, artifact),
        "download": code_block(download_command(artifact), language="bash"),
        "creation": _creation(artifact),
        "training": training_context(inputs.manifest, artifact, inputs.files.get(artifact.id, {}),
                                     view.serving_acceptance(artifact)),
        "choose": view.choose(artifact),
        "provenance": _provenance(manifest, measured, artifact),
        "links": _links(manifest, artifact, view),
        "citation": {"bibtex": code_block(citation.bibtex(manifest, artifact), language="bibtex")},
        "sections": _sections(inputs, artifact),
        # Every kind present, None without data: a family whose reference has nothing to compare with (a
        # reference and a draft) has no quality plot, and the template asks for it by name.
        "plots": {**dict.fromkeys(("load", "acceptance", "quality")), **{p.kind: p.path for p in plots}},
    }
    context["numbers"] = [
        {"id": code_span(r.id), "label": escape_markdown(r.label), "text": Markdown(r.text),
         "records": Markdown(", ".join(code_span(n) for n in r.records))}
        for r in numbers.rows
    ]
    age = numbers.date_range()
    # One date is said as one date: "measured between 2026-11-29 and 2026-11-29" reads like a typo.
    context["age"] = (None if not age else Markdown(f"on {age[0]}") if age[0] == age[1]
                      else Markdown(f"between {age[0]} and {age[1]}"))
    return context, numbers, plots


def _artifact(manifest: Manifest, artifact: Artifact) -> Context:
    reference = manifest.reference
    return {
        "id": escape_markdown(artifact.id),
        "kind": artifact.kind,
        "title": escape_markdown(artifact.title or artifact.repo.split("/")[1]),
        "repo": escape_markdown(artifact.repo),
        "link": link(artifact.repo, hub_url(artifact.repo)),
        "description": escape_markdown(artifact.description) if artifact.description else None,
        "published": artifact.publish,
        "reference_title": escape_markdown(reference.title or reference.repo),
        "scheme": code_span(artifact.quantization.scheme) if artifact.quantization else None,
        "target": _target_link(manifest, artifact),
    }


def _target_link(manifest: Manifest, artifact: Artifact) -> Markdown | None:
    if artifact.draft is None:
        return None
    target = manifest.artifact_by_id(artifact.draft.target)
    return link(target.title or target.repo, hub_url(target.repo))


def _family(manifest: Manifest) -> Context:
    family = manifest.family
    return {
        "display_name": escape_markdown(family.display_name),
        "base_model": link(family.base_model, hub_url(family.base_model)),
        "version": escape_markdown(family.version),
        "tag": escape_markdown(manifest.tag_name()),
        "collection": escape_markdown(family.collection) if family.collection else None,
    }


class _View:
    """The measured parts of a card; each number is registered as it is formatted."""

    def __init__(self, manifest: Manifest, measured: FamilyMeasurements, numbers: NumberRegistry,
                 artifact: Artifact, sections: Mapping[str, Mapping[str, str]]) -> None:
        self.manifest = manifest
        self.sections = sections
        self.measured = measured
        self.numbers = numbers
        self.card = artifact
        self.percent = {g.id: self._is_fraction(g) for g in manifest.gate}

    def _is_fraction(self, gate: Gate) -> bool:
        values = [r.value for (_, gid), r in self.measured.gates.items() if gid == gate.id and r.value is not None]
        return bool(values) and all(0.0 <= v <= 1.0 for v in values)

    def shown(self, other: Artifact) -> bool:
        """Whether `other` appears in this card's family tables: a published card leaves out the artifacts
        the release does not publish (regression fixtures), which readers could neither download nor use."""
        return (other.publish or repo_exists(self.manifest, other) or not self.card.publish
                or other.id == self.card.id)

    def _shown_point(self, p: SpeedPoint) -> bool:
        draft = p.entry.record.draft_artifact_id
        return draft is None or self.shown(self.manifest.artifact_by_id(draft))

    def name(self, other: Artifact, *, short: bool = False) -> Markdown:
        """An artifact's title (`short`: its repo's name, for the narrow family table), linked to its Hub
        repo only when that repo exists (published by this release, or the base model or a Hub source)."""
        title = other.repo.split("/")[1] if short else (other.title or other.repo)
        return link(title, hub_url(other.repo)) if repo_exists(self.manifest, other) else escape_markdown(title)

    # -- quality -------------------------------------------------------------------------------------------
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
                if result is None or not self.shown(other):
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

    def headline(self, artifact: Artifact) -> list[Markdown]:
        lines: list[Markdown] = []
        size = self.size(artifact)
        reference = self.manifest.reference
        if size is not None:
            ref_size = self.size(reference) if artifact.kind not in {"reference", "draft"} else None
            lines.append(Markdown(f"Weights: {size}" + (f" (reference: {ref_size})" if ref_size else "")))
        if artifact.kind not in ("reference", "draft"):
            for gate in accuracy_gates(self.manifest):
                result = self.measured.gate(artifact.id, gate.id)
                if result is None:
                    continue
                delta = self.delta(result, f" {self.unit(gate)} vs the reference")
                label = escape_markdown(gate.label or gate.id)
                if delta is None:
                    verdict, reason = escape_markdown(result.verdict), escape_markdown(result.reason)
                    lines.append(Markdown(f"{label}: {verdict} ({reason})"))
                    continue
                recovery = self.recovery(result)
                lines.append(Markdown(f"{label}: {delta}"
                                      + (f", recovery {recovery}" if recovery else "")
                                      + f": {self.verdict(result)}"))
        if artifact.kind == "draft":
            return lines + self._draft_headline(artifact)
        for workload in self.manifest.workload:
            best = self.best(artifact.id, workload.id)
            if best is None:
                continue
            label = escape_markdown(workload.label or workload.id)
            if best.speculative == NONE:
                alone = all(p.speculative == NONE for p in self.measured.points(artifact_id=artifact.id,
                                                                                 workload_id=workload.id))
                why = "the only config measured" if alone else "no speculative config was faster"
                lines.append(Markdown(f"{label}: {self.tps(best)} tok/s batch-1 without speculation ({why})"))
            else:
                lines.append(Markdown(f"{label}: {self.tps(best)} tok/s batch-1 with {code_span(best.speculative)}, "
                                      f"{self.speedup(best)} over no speculation"))
        if artifact.kind != "reference":
            lines += self._decode_vs_reference(artifact)
        return lines

    def _decode_vs_reference(self, artifact: Artifact) -> list[Markdown]:
        """Per workload measured on both, this artifact's decode speed without speculation over the
        reference's (the seed's "+60 % batch-1 decode vs bf16"), with the range its repeats allow."""
        lines = []
        for workload in self.manifest.workload:
            pair = self.reference_pair(artifact.id, workload.id)
            if pair is None:
                continue
            mine, ref = pair
            ratio = self.vs_reference(mine, ref)
            batch = "batch-1" if mine.concurrency == 1 else f"concurrency {mine.concurrency}"
            lines.append(Markdown(f"{escape_markdown(workload.label or workload.id)}: decode {ratio} the "
                                  f"reference's without speculation, {batch}: {self.tps(mine)} tok/s against "
                                  f"{self.tps(ref)}"))
        return lines

    def reference_pair(self, artifact_id: str, workload_id: str) -> tuple[SpeedPoint, SpeedPoint] | None:
        """This artifact's and the reference's points without speculation on a workload, at the lowest
        concurrency both were measured at, or None when one of them is missing."""
        reference = self.manifest.reference.id
        mine = {p.concurrency: p for p in self.measured.points(artifact_id=artifact_id, workload_id=workload_id)
                if p.speculative == NONE}
        theirs = {p.concurrency: p for p in self.measured.points(artifact_id=reference, workload_id=workload_id)
                  if p.speculative == NONE}
        shared = sorted(set(mine) & set(theirs))
        if not shared or theirs[shared[0]].throughput <= 0:
            return None
        return mine[shared[0]], theirs[shared[0]]

    def vs_reference(self, p: SpeedPoint, ref: SpeedPoint, *, spread: bool = True) -> Markdown:
        """`p`'s output tok/s over the reference's point `ref` with its range: the slowest repeat over the
        reference's fastest to the fastest over its slowest, "1.60x (1.52-1.66)" (`spread=False`: the
        ratio alone, for the narrow family table, whose tok/s cell carries the repeats' range)."""
        base = f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}.vs_reference"
        label = (f"output tok/s of {p.artifact_id} ({p.speculative}) over the reference without speculation, "
                 f"{p.workload.id}" + (f", concurrency {p.concurrency}" if p.concurrency != 1 else ""))
        value = self.numbers.add(base, label, fixed(p.throughput / ref.throughput, 2), [p.entry, ref.entry])
        mine, theirs = self._spread(p, "output_throughput"), self._spread(ref, "output_throughput")
        if not spread or mine is None or theirs is None or theirs[0] <= 0:
            return Markdown(f"{value}{TIMES}")
        low = self.numbers.add(f"{base}.min", f"{label}, lowest (slowest repeat / the reference's fastest)",
                               fixed(mine[0] / theirs[1], 2), [p.entry, ref.entry])
        high = self.numbers.add(f"{base}.max", f"{label}, highest (fastest repeat / the reference's slowest)",
                                fixed(mine[1] / theirs[0], 2), [p.entry, ref.entry])
        return Markdown(f"{value}{TIMES} ({low}{DASH}{high})")

    def _draft_headline(self, artifact: Artifact) -> list[Markdown]:
        """Which workloads this draft wins on its target and which another config wins: a config slower
        than the fastest is never headlined with its numbers."""
        assert artifact.draft is not None
        lines: list[Markdown] = []
        target = self.manifest.artifact_by_id(artifact.draft.target)
        for workload in self.manifest.workload:
            mine = [p for p in self.measured.points(workload_id=workload.id, draft_id=artifact.id)
                    if p.concurrency == 1 and p.artifact_id == target.id]
            if not mine:
                continue
            label = escape_markdown(workload.label or workload.id)
            best = self.best(target.id, workload.id)
            point = mine[0]
            if best is not None and best.entry.name == point.entry.name:
                lines.append(Markdown(f"{label}: fastest config on {escape_markdown(target.id)}, {self.tps(point)} "
                                      f"tok/s batch-1, {self.speedup(point)} over no speculation"))
            elif best is None:
                lines.append(Markdown(f"{label}: not ranked (no batch-1 point without speculation on "
                                      f"{escape_markdown(target.id)} to compare with)"))
            else:
                lines.append(Markdown(f"{label}: {code_span(best.speculative)} is faster on "
                                      f"{escape_markdown(target.id)}; use it there, not this draft"))
        gates = self.draft_gates(artifact)
        if gates is not None and gates["measured"]:
            lines.append(Markdown("Draft gates: " + ("pass" if gates["passed"] else "**fail**")
                                  + " (table under Speculative decoding acceptance)"))
        return lines

    def best(self, artifact_id: str, workload_id: str) -> SpeedPoint | None:
        """The fastest batch-1 config of `artifact_id` on a workload among every config measured on it
        (none, ngram, each draft), or None when no point without speculation was measured to compare with:
        a config is never called best without knowing it beats serving without speculation."""
        best = self.measured.best_batch1(artifact_id, workload_id)
        if best is None or (best.speculative != NONE and best.baseline is None):
            return None
        return best

    def size(self, artifact: Artifact) -> Markdown | None:
        found = self.measured.sizes.get(artifact.id)
        if found is None:
            return None
        value, unit = binary_size(found[0])
        text = self.numbers.add(f"size.{artifact.id}", f"weights of {artifact.id} ({unit})", value, [found[1]])
        return Markdown(f"{text} {unit}")

    def memory(self, artifact: Artifact) -> tuple[Markdown, Markdown]:
        """(memory to serve, peak RAM) of `artifact`: "not measured" without figures, "with its target" for drafts."""
        if artifact.kind == "draft":
            # A draft head serves inside its target's server; its own weights are its whole addition.
            return Markdown("with its target"), Markdown("with its target")
        entries = [r.entry for (aid, _), r in self.measured.gates.items() if aid == artifact.id]
        entries += [p.entry for p in self.measured.points(artifact_id=artifact.id)]
        size = self.measured.sizes.get(artifact.id)
        found = memory_figures(entries, weight_bytes=size[0] if size else None)
        absent = Markdown("not measured")
        if found is None:
            return absent, absent
        serve = absent
        if found.serve_bytes is not None:
            sources = [found.entry]
            if found.weights_from_files and size and size[1].name != found.entry.name:
                sources.append(size[1])
            value, unit = binary_size(found.serve_bytes)
            serve = Markdown(self.numbers.add(
                f"memory.{artifact.id}.serve",
                f"memory to serve {artifact.id}: weights + KV cache of one {found.max_model_len}-token request "
                f"({unit})",
                value, sources) + f" {unit}")
        peak = absent
        if found.peak_bytes is not None:
            value, unit = binary_size(found.peak_bytes)
            peak = Markdown(self.numbers.add(f"memory.{artifact.id}.peak",
                                             f"peak host RAM (PSS) of the server processes of {artifact.id} ({unit})",
                                             value, [found.entry]) + f" {unit}")
        return serve, peak

    # -- speed -----------------------------------------------------------------------------------------------
    def _point_id(self, p: SpeedPoint) -> str:
        sweep = f".in{p.input_len}" if p.input_len else ""
        return f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}{sweep}"

    def _point_label(self, p: SpeedPoint) -> str:
        sweep = f", input {p.input_len} tokens" if p.input_len else ""
        return f"{p.workload.id} on {p.artifact_id}, {p.speculative}, concurrency {p.concurrency}{sweep}"

    def metric(self, p: SpeedPoint, name: str, places: int, label: str) -> Markdown | None:
        if name not in p.metrics:
            return None
        return self.numbers.add(f"{self._point_id(p)}.{name}", f"{label}, {self._point_label(p)}",
                                fixed(p.metrics[name], places), [p.entry])

    def latency(self, p: SpeedPoint, name: str, places: int, label: str) -> Markdown | None:
        """A latency; an inter-token latency that measures chunking, not decode, is not printed as a number.

        vLLM's streaming can deliver several tokens in one chunk; `vllm bench serve` then records gaps of
        ~0 ms between the chunk's tokens, and a repeat whose tokens mostly arrived bunched has a median ITL
        near 0 while its time per output token (TPOT, from the request's duration) stays honest. An ITL
        below a tenth of the TPOT, in the median or any repeat, is that artefact."""
        if name not in p.metrics:
            return None
        if name.startswith("itl_") and _bunched(p, name):
            return Markdown("n/a (bunched)")
        return self.metric(p, name, places, label)

    def _spread(self, p: SpeedPoint, name: str) -> tuple[float, float] | None:
        spread = p.entry.record.extra.get("spread")
        pair = spread.get(name) if isinstance(spread, dict) else None
        values = [float(v) for v in pair if isinstance(v, int | float) and not isinstance(v, bool)] if isinstance(
            pair, list) else []
        return (values[0], values[1]) if len(values) == 2 else None

    def _repeats(self, p: SpeedPoint) -> int | None:
        repeats = p.entry.record.extra.get("repeats")
        return repeats if isinstance(repeats, int) and not isinstance(repeats, bool) else None

    def tps(self, p: SpeedPoint) -> Markdown:
        """Output tok/s, the median over repeats with the range of the repeats: "790.2 (658.8-796.8)"."""
        median = self.metric(p, "output_throughput", 1, "output tok/s (median of repeats)")
        assert median is not None
        spread = self._spread(p, "output_throughput")
        if self._repeats(p) == 1:
            # The count is a number in a measured block too: the lint holds every such number to a record.
            runs = self.numbers.add(f"{self._point_id(p)}.repeats", f"repeats, {self._point_label(p)}", "1", [p.entry])
            return Markdown(f"{median} ({runs} run)")
        if spread is None:
            return Markdown(f"{median} (spread not recorded)")
        low = self.numbers.add(f"{self._point_id(p)}.output_throughput.min",
                               f"output tok/s, slowest repeat, {self._point_label(p)}", fixed(spread[0], 1), [p.entry])
        high = self.numbers.add(f"{self._point_id(p)}.output_throughput.max",
                                f"output tok/s, fastest repeat, {self._point_label(p)}", fixed(spread[1], 1),
                                [p.entry])
        return Markdown(f"{median} ({low}{DASH}{high})")

    def failed(self, p: SpeedPoint) -> Markdown:
        failed = p.entry.record.extra.get("failed")
        if isinstance(failed, bool) or not isinstance(failed, int):
            return Markdown("not recorded")
        return self.numbers.add(f"{self._point_id(p)}.failed", f"failed requests, {self._point_label(p)}",
                                str(failed), [p.entry])

    def speedup(self, p: SpeedPoint) -> Markdown | None:
        """Speedup over no speculation with its range: the slowest repeat over the fastest baseline repeat
        to the fastest over the slowest, "2.14x (1.71-2.22)" with the multiplication sign and an en dash."""
        if p.speedup is None or p.baseline is None:
            return None
        label = (f"speedup of {p.speculative} over none, {p.workload.id} on {p.artifact_id}, "
                 f"concurrency {p.concurrency}" + (f", input {p.input_len} tokens" if p.input_len else ""))
        value = self.numbers.add(f"{self._point_id(p)}.speedup", label, fixed(p.speedup, 2), p.records)
        mine, base = self._spread(p, "output_throughput"), self._spread(p.baseline, "output_throughput")
        if mine is None or base is None or base[0] <= 0:
            return Markdown(f"{value}{TIMES}")
        low = self.numbers.add(f"{self._point_id(p)}.speedup.min", f"{label}, lowest (slowest repeat / fastest "
                               "baseline repeat)", fixed(mine[0] / base[1], 2), p.records)
        high = self.numbers.add(f"{self._point_id(p)}.speedup.max", f"{label}, highest (fastest repeat / slowest "
                                "baseline repeat)", fixed(mine[1] / base[0], 2), p.records)
        return Markdown(f"{value}{TIMES} ({low}{DASH}{high})")

    def _speed_row(self, p: SpeedPoint, best: SpeedPoint | None) -> Context:
        return {"config": code_span(p.speculative), "artifact": escape_markdown(p.artifact_id),
                "tps": self.tps(p), "speedup": self.speedup(p),
                "itl": self.latency(p, "itl_median_ms", 2, "ITL median ms"),
                "ttft": self.latency(p, "ttft_median_ms", 1, "TTFT median ms"),
                "mal": self.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                "best": best is not None and p.entry.name == best.entry.name}

    def speed(self, artifact: Artifact) -> Context:
        workloads = []
        server = artifact.draft.target if artifact.draft is not None else artifact.id
        for workload in self.manifest.workload:
            points = [p for p in self.measured.points(artifact_id=server, workload_id=workload.id)
                      if p.concurrency == 1 and self._shown_point(p)]
            if artifact.kind == "draft" and not any(p.entry.record.draft_artifact_id == artifact.id for p in points):
                continue  # a workload this draft never served in says nothing about it
            if not points:
                continue
            best = self.best(server, workload.id)
            rows = [self._speed_row(p, best) for p in points]
            workloads.append({
                "label": escape_markdown(workload.label or workload.id), "id": escape_markdown(workload.id),
                "output_len": workload.output_len, "thinking": workload.thinking, "ignore_eos": workload.ignore_eos,
                "rows": rows, "best": code_span(best.speculative) if best else None,
                "bunched": any(r["itl"] == "n/a (bunched)" for r in rows),
            })
        return {"measured": bool(workloads), "workloads": workloads, "by_artifact": artifact.kind == "draft",
                "server": escape_markdown(server)}

    def load(self, artifact: Artifact) -> Context:
        tables = []
        for workload in self.manifest.workload:
            if artifact.kind == "draft":
                points = self.measured.points(workload_id=workload.id, draft_id=artifact.id)
            else:
                points = self.measured.points(artifact_id=artifact.id, workload_id=workload.id)
            by_config: dict[tuple[str, str], list[SpeedPoint]] = {}
            for p in points:
                by_config.setdefault((p.artifact_id, p.speculative), []).append(p)
            for (artifact_id, spec), series in by_config.items():
                if len({p.concurrency for p in series}) < 2:
                    continue
                rows = [{"concurrency": Markdown(str(p.concurrency)), "tps": self.tps(p),
                         "itl": self.latency(p, "itl_median_ms", 2, "ITL median ms"),
                         "itl_p90": self.latency(p, "itl_p90_ms", 2, "ITL p90 ms"),
                         "ttft": self.latency(p, "ttft_median_ms", 1, "TTFT median ms"),
                         "ttft_p90": self.latency(p, "ttft_p90_ms", 1, "TTFT p90 ms"),
                         "failed": self.failed(p),
                         "acceptance": self.metric(p, "spec_acceptance_rate", 2, "acceptance rate")}
                        for p in sorted(series, key=lambda p: p.concurrency)]
                tables.append({
                    "workload": escape_markdown(workload.label or workload.id), "config": code_span(spec),
                    "artifact": escape_markdown(artifact_id), "rows": rows, "speculates": spec != NONE,
                    "held": self._held(series) if spec != NONE else None,
                    "bunched": any(r["itl"] == "n/a (bunched)" or r["itl_p90"] == "n/a (bunched)" for r in rows),
                })
        return {"measured": bool(tables), "tables": tables}

    def sweep(self, artifact: Artifact) -> Context:
        """The context-length sweeps (`input_lens`) measured on this artifact (or, on a draft's card, served
        with it): per workload and config, one row per input length."""
        tables = []
        for workload in self.manifest.workload:
            points = [p for p in self.measured.sweep.values() if p.workload.id == workload.id
                      and (p.entry.record.draft_artifact_id == artifact.id if artifact.kind == "draft"
                           else p.artifact_id == artifact.id) and self._shown_point(p)]
            by_config: dict[tuple[str, str], list[SpeedPoint]] = {}
            for p in points:
                by_config.setdefault((p.artifact_id, p.speculative), []).append(p)
            # No speculation first, the baseline the others' speedups are over.
            for (artifact_id, spec), series in sorted(by_config.items(), key=lambda kv: (kv[0][0], kv[0][1] != NONE,
                                                                                       kv[0][1])):
                rows = [{"input_len": Markdown(str(p.input_len)), "tps": self.tps(p),
                         "ttft": self.latency(p, "ttft_median_ms", 1, "TTFT median ms"),
                         "tpot": self.latency(p, "tpot_median_ms", 2, "TPOT median ms"),
                         "acceptance": self.metric(p, "spec_acceptance_rate", 2, "acceptance rate"),
                         "speedup": self.speedup(p)}
                        for p in sorted(series, key=lambda p: p.input_len or 0)]
                tables.append({"workload": escape_markdown(workload.label or workload.id), "config": code_span(spec),
                               "artifact": escape_markdown(artifact_id), "rows": rows, "speculates": spec != NONE,
                               "output_len": workload.output_len, "sampling": escape_markdown(_sampling(workload))})
        return {"measured": bool(tables), "tables": tables}

    def pairings(self, artifact: Artifact) -> Context:
        """The draft x target matrix (`Draft.matrix`): on a draft's card, its batch-1 points on every target it
        was measured against, per workload, with a recommendation; on a target's card, the matrix drafts
        measured against it, linked to their cards."""
        if artifact.draft is None:
            drafts = [d for d in self.manifest.artifact if d.draft is not None and d.draft.matrix and self.shown(d)
                      and d.draft.target != artifact.id and self.measured.points(artifact_id=artifact.id,
                                                                                 draft_id=d.id)]
            return {"draft": False, "measured": False,
                    "links": Markdown(", ".join(self.name(d) for d in drafts)) if drafts else None}
        if not artifact.draft.matrix:
            return {"draft": True, "measured": False, "links": None}
        tables = []
        for workload in self.manifest.workload:
            points = [p for p in self.measured.points(workload_id=workload.id, draft_id=artifact.id)
                      if p.concurrency == min(workload.concurrency) and self.shown(
                          self.manifest.artifact_by_id(p.artifact_id))]
            if not points:
                continue
            order = {a.id: i for i, a in enumerate(self.manifest.artifact)}
            points.sort(key=lambda p: (order[p.artifact_id], p.speculative))
            paying = [p for p in points if p.speedup is not None and p.speedup > 1.0]
            best = max(paying, key=lambda p: p.speedup or 0.0, default=None)
            rows = [{"target": self.name(self.manifest.artifact_by_id(p.artifact_id), short=True),
                     "config": code_span(p.speculative),
                     "mal": self.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                     "positions": Markdown(" / ".join(
                         self.numbers.add(f"{self._point_id(p)}.pos{i}", f"acceptance at draft position {i}, "
                                          f"{p.workload.id} on {p.artifact_id}, {p.speculative}", fixed(v, 2),
                                          [p.entry]) for i, v in p.positions()) or "n/a"),
                     "speedup": self.speedup(p),
                     "pairing": Markdown("**recommended**" if p is best else "pays" if p in paying else
                                         "no speedup measured" if p.speedup is None else "slower than none")}
                    for p in points]
            tables.append({"workload": escape_markdown(workload.label or workload.id),
                           "concurrency": min(workload.concurrency), "rows": rows})
        return {"draft": True, "measured": bool(tables), "tables": tables, "links": None,
                "trained": escape_markdown(artifact.draft.target)}

    def _held(self, series: list[SpeedPoint]) -> Markdown | None:
        """Acceptance over a whole load sweep, from every point's /metrics counter deltas: "154k accepted of
        354k drafted tokens (0.44)", as the seeds state it."""
        counted = [p for p in series if "spec_accepted_tokens" in p.metrics and "spec_draft_tokens" in p.metrics]
        if not counted:
            return None
        accepted = sum(p.metrics["spec_accepted_tokens"] for p in counted)
        drafted = sum(p.metrics["spec_draft_tokens"] for p in counted)
        if drafted <= 0:
            return None
        first = counted[0]
        base = f"speed.{first.artifact_id}.{first.workload.id}.{first.speculative}.held"
        what = f"{first.workload.id} on {first.artifact_id}, {first.speculative}, over the load sweep"
        entries = [p.entry for p in counted]
        parts = [self.numbers.add(f"{base}.accepted", f"accepted draft tokens, {what}", _count(accepted), entries),
                 self.numbers.add(f"{base}.drafted", f"drafted tokens, {what}", _count(drafted), entries),
                 self.numbers.add(f"{base}.rate", f"acceptance rate, {what}", fixed(accepted / drafted, 2), entries)]
        return Markdown(f"{parts[0]} accepted of {parts[1]} drafted tokens ({parts[2]})")

    def acceptance(self, artifact: Artifact) -> Context:
        if artifact.kind == "draft":
            points = self.measured.points(draft_id=artifact.id)
        else:
            points = [p for p in self.measured.points(artifact_id=artifact.id) if p.speculative != NONE]
        points = [p for p in points if self._shown_point(p)]
        points = [p for p in points if "spec_acceptance_rate" in p.metrics and p.concurrency == min(
            q.concurrency for q in points if q.workload.id == p.workload.id and q.speculative == p.speculative)]
        rows = []
        for p in points:
            unconditional = [self.numbers.add(f"{self._point_id(p)}.pos{i}", f"acceptance at draft position {i}, "
                                              f"{p.workload.id} on {p.artifact_id}, {p.speculative}", fixed(v, 2),
                                              [p.entry]) for i, v in p.positions()]
            conditional = [self.numbers.add(f"{self._point_id(p)}.cpos{i}", f"conditional acceptance at draft "
                                            f"position {i}, {p.workload.id} on {p.artifact_id}, {p.speculative}",
                                            fixed(v, 2), [p.entry])
                           for i, v in p.positions("spec_conditional_acceptance_pos_")]
            rows.append({
                "label": Markdown(f"{escape_markdown(p.workload.label or p.workload.id)}, {code_span(p.speculative)}"
                                  + (f" on {escape_markdown(p.artifact_id)}" if artifact.kind == "draft" else "")),
                "rate": self.metric(p, "spec_acceptance_rate", 2, "acceptance rate"),
                "mal": self.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                "positions": Markdown(" / ".join(unconditional)) if unconditional else Markdown("n/a"),
                "conditional": Markdown(" / ".join(conditional)) if conditional else Markdown("n/a"),
                "concurrency": p.concurrency,
            })
        return {"measured": bool(rows), "rows": rows, "gates": self.draft_gates(artifact)}

    def serving_acceptance(self, artifact: Artifact) -> list[tuple[Markdown, list[tuple[int, Markdown]]]]:
        """A draft's per-position acceptance served with its target at batch 1, per workload (the figures
        its validation acceptance is read against), registered under the acceptance table's ids."""
        if artifact.draft is None:
            return []
        found = []
        for p in self.measured.points(draft_id=artifact.id):
            if p.concurrency != 1 or p.artifact_id != artifact.draft.target or not p.positions():
                continue
            label = Markdown(f"{escape_markdown(p.workload.label or p.workload.id)}, {code_span(p.speculative)}")
            found.append((label, [(i, self.numbers.add(f"{self._point_id(p)}.pos{i}", f"acceptance at draft "
                                                       f"position {i}, {p.workload.id} on {p.artifact_id}, "
                                                       f"{p.speculative}", fixed(v, 2), [p.entry]))
                                  for i, v in p.positions()]))
        return found

    def draft_gates(self, artifact: Artifact) -> Context | None:
        """A draft card's draft-gate verdicts, judged as the release judges them, from the card's own records."""
        if artifact.draft is None:
            return None
        from dataclasses import replace

        from hfrelease.speed.result import row_from_record
        from hfrelease.speed.verdict import draft_checks

        # Only the points served with its target are judged, as the release judges its job's records; the
        # acceptance table above also shows it served with other artifacts (`eval --speed`).
        points = {(p.artifact_id, p.workload.id, p.speculative): p for p in self.measured.points(draft_id=artifact.id)
                  if p.concurrency == 1 and p.artifact_id == artifact.draft.target}
        rows = [replace(row_from_record(p.entry.record, origin="recorded"), speedup=p.speedup)
                for p in points.values()]
        checks = [c for c in draft_checks(self.manifest, rows) if c.draft_id == artifact.id]
        d = artifact.draft
        names = {"target": "served with its target", "acceptance": "acceptance rate",
                 "acceptance-length": "mean acceptance length", "speedup": "speedup over no speculation"}
        required = {"target": f"target = {d.target}", "acceptance": f"min_acceptance_rate = {d.min_acceptance_rate:g}"
                    if d.min_acceptance_rate is not None else "measured",
                    "acceptance-length": f"min_acceptance_length = {d.min_acceptance_length:g}"
                    if d.min_acceptance_length is not None else "",
                    "speedup": f"min_speedup = {d.min_speedup:g}" if d.min_speedup is not None else ""}
        table = []
        for c in checks:
            p = points[(c.artifact_id, c.workload_id, c.speculative)]
            value: Markdown | None
            if c.check == "target":
                value = code_span(c.artifact_id)
            elif c.check == "speedup":
                value = self.speedup(p)
            else:
                metric = "spec_acceptance_rate" if c.check == "acceptance" else "spec_mean_acceptance_length"
                value = self.metric(p, metric, 2, names[c.check])
            table.append({
                "label": Markdown(f"{escape_markdown(p.workload.label or p.workload.id)}, {code_span(p.speculative)}"
                                  f" on {escape_markdown(p.artifact_id)}"),
                "check": names[c.check], "value": value or Markdown("not measured"),
                "required": code_span(required[c.check]), "verdict": Markdown("pass" if c.verdict == "pass" else
                                                                             "**fail**"),
            })
        failed = any(c.verdict == "fail" for c in checks)
        return {"measured": bool(checks), "rows": table, "passed": bool(checks) and not failed,
                "published": artifact.publish, "command": code_span(f"hfrelease eval --artifact {artifact.id}")}

    # -- family ----------------------------------------------------------------------------------------------
    def main_workload(self) -> Workload | None:
        """The workload the family table compares speed on: the first one the manifest lists that runs at
        batch 1 and on which the reference was measured (the manifest's order says what matters most)."""
        reference = self.manifest.reference.id
        for workload in self.manifest.workload:
            if 1 in workload.concurrency and self.best(reference, workload.id) is not None:
                return workload
        return None

    def choose(self, artifact: Artifact) -> Context:
        """The compact choice table: one summary cell per question, details in the tables below it."""
        workload = self.main_workload()
        reference = self.manifest.reference
        ref_none = self._none_point(reference.id, workload.id) if workload else None
        rows, memory = [], []
        for other in self.manifest.artifact:
            if not self.shown(other):
                continue
            serve, peak = self.memory(other)
            size = self.size(other) or Markdown("not measured")
            rows.append({"name": self.name(other, short=True), "self": other.id == artifact.id,
                         "published": other.publish,
                         "size": size, "memory": serve, "quality": self._quality_summary(other),
                         "speed": self._speed_summary(other, workload, ref_none),
                         "when": self._choose_when(other, workload)})
            memory.append({"name": escape_markdown(other.title or other.repo), "self": other.id == artifact.id,
                           "size": size, "memory": serve, "peak": peak})
        return {"rows": rows, "memory": memory,
                "workload": escape_markdown(workload.label or workload.id) if workload else None}

    def _none_point(self, artifact_id: str, workload_id: str) -> SpeedPoint | None:
        return self.measured.speed.get((artifact_id, workload_id, NONE, 1))

    def _gate_results(self, other: Artifact) -> list[GateResult]:
        return [r for g in accuracy_gates(self.manifest) if (r := self.measured.gate(other.id, g.id)) is not None]

    def _quality_summary(self, other: Artifact) -> Markdown:
        if other.kind == "draft":
            return Markdown("lossless")
        if other.kind == "reference":
            return Markdown("the reference")
        results = self._gate_results(other)
        if not results:
            return Markdown("not measured")
        failed = [escape_markdown(r.gate.label or r.gate.id) for r in results if r.verdict == "fail"]
        void = [escape_markdown(r.gate.label or r.gate.id) for r in results if r.value is None]
        compared = [r for r in results if r.comparison is not None]
        head = "**fails**" if failed else f"void ({', '.join(void)})" if void else "passes"
        if not compared:
            return Markdown(head)
        # The gate with the lowest CI bound is the one the verdicts hinge on: show it with its interval.
        worst = min(compared, key=lambda r: (r.comparison.ci_low if r.comparison else 0.0))
        delta = self.delta(worst)
        return Markdown(f"{head}: {delta}")

    def _speed_summary(self, other: Artifact, workload: Workload | None, ref_none: SpeedPoint | None) -> Markdown:
        """Batch-1 tok/s on the main workload, served this artifact's best way (a draft: its target with
        it), and the ratio over the reference served without speculation."""
        if workload is None:
            return Markdown("not measured")
        if other.kind == "draft":
            assert other.draft is not None
            points = [p for p in self.measured.points(workload_id=workload.id, draft_id=other.id)
                      if p.concurrency == 1 and p.artifact_id == other.draft.target]
            point = points[0] if points else None
        else:
            point = self.best(other.id, workload.id)
        if point is None:
            return Markdown("not measured")
        text = str(self.tps(point))
        if point.speculative != NONE:
            text += f" {code_span(point.speculative)}"
        if ref_none is not None and ref_none.throughput > 0 and not (other.kind == "reference"
                                                                     and point.speculative == NONE):
            text += f", {self.vs_reference(point, ref_none, spread=False)}"
        return Markdown(text)

    def _choose_when(self, other: Artifact, workload: Workload | None) -> Markdown:  # noqa: PLR0911
        """When to pick this artifact, from what was measured (a `choose_when` section overrides it)."""
        own = self.sections.get(other.id, {}).get("choose_when")
        if own:
            return prose(" ".join(own.split()))
        if not other.publish and not repo_exists(self.manifest, other):
            return Markdown("not published")
        if other.kind == "reference":
            return Markdown("the original weights")
        if other.kind == "draft":
            return self._draft_when(other)
        results = self._gate_results(other)
        failed = [escape_markdown(r.gate.label or r.gate.id) for r in results if r.verdict == "fail"]
        if failed:
            return Markdown("avoid: fails a gate")
        if not results or any(r.comparison is None for r in results):
            return Markdown("not judged against the reference yet")
        sizes = {a.id: self.measured.sizes[a.id][0] for a in self.manifest.artifact
                 if a.id in self.measured.sizes and a.kind in {"quant", "variant"} and self.shown(a)
                 and all(r.verdict == "pass" for r in self._gate_results(a)) and self._gate_results(a)}
        if other.id in sizes and sizes[other.id] == min(sizes.values()) and len(sizes) > 1:
            return Markdown("smallest that passes")
        return Markdown("passes, smaller weights" if other.kind == "quant" else "passes every gate")

    def _draft_when(self, other: Artifact) -> Markdown:
        assert other.draft is not None
        gates = self.draft_gates(other)
        if gates is not None and gates["measured"] and not gates["passed"]:
            return Markdown("avoid: draft gates fail")
        target = other.draft.target
        won = [escape_markdown(w.label or w.id) for w in self.manifest.workload
               if (best := self.best(target, w.id)) is not None and best.entry.record.draft_artifact_id == other.id]
        if won:
            return Markdown(", ".join(won))
        return Markdown("no workload yet: slower")


def _creation(artifact: Artifact) -> Context | None:
    q = artifact.quantization
    if q is None:
        return None
    args = [f"targets={json.dumps(q.targets)}", f"scheme={json.dumps(q.scheme)}"]
    if q.ignore:
        args.append(f"ignore={json.dumps(q.ignore)}")
    modifier = q.modifier or "QuantizationModifier"
    recipe = (f"from llmcompressor import oneshot\nfrom llmcompressor.modifiers.quantization import {modifier}\n\n"
              f"recipe = {modifier}({', '.join(args)})\n"
              + ("oneshot(model=MODEL, recipe=recipe)  # data-free" if q.data_free
                 else f"oneshot(model=MODEL, dataset=CALIBRATION, recipe=recipe)  # {q.calibration or 'calibrated'}"))
    return {
        "scheme": code_span(q.scheme), "format": code_span(q.format),
        "tool": escape_markdown(f"{q.tool} {q.tool_version}"),
        "modifier": code_span(modifier), "targets": code_span(", ".join(q.targets)),
        "ignore": code_span(", ".join(q.ignore)) if q.ignore else None,
        "data": escape_markdown("data-free" if q.data_free else (q.calibration or "calibrated")),
        "recipe_file": code_span(q.recipe) if q.recipe else None,
        "code": code_block(recipe, language="python"),
        "notes": escape_markdown(q.notes) if q.notes else None,
    }


def _provenance(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> Context:
    """Benchmark provenance as one line per gate and workload (a list never outgrows the card's column,
    where a 13-column table did), and the machines and versions they ran on, each said once."""
    gates, machines = [], []
    for gate in manifest.gate:
        results = [r for (aid, gid), r in measured.gates.items() if gid == gate.id]
        if not results:
            continue
        records = [e.record for r in results for e in r.entries]
        ns = sorted({r.n for r in records})
        dates = sorted(r.started_at[:10] for r in records)
        generation = records[0].generation
        settings = [f"{key} {generation[key]}" for key in ("temperature", "top_p", "num_fewshot")
                    if generation.get(key) is not None]
        harness = _harness(records[0].harness, records[0].versions)
        task = code_span(gate.task or " ".join(gate.command or []) or gate.entry_point or gate.fidelity or gate.id)
        parts = [f"{harness}, {task}, metric {code_span(gate.metric)}, {escape_markdown(gate.mode)}",
                 escape_markdown(f"n {'/'.join(map(str, ns))}" + (f" (limit {gate.limit})" if gate.limit
                                                                   else " (full set)")),
                 escape_markdown(_seeds(gate) + f", max tokens {gate.max_tokens}"
                                 + "".join(f", {x}" for x in settings)),
                 escape_markdown(_thresholds(gate)),
                 escape_markdown("measured " + _dates(dates))]
        label = f"**{escape_markdown(gate.label or gate.id)}**"
        if gate.description:
            label += f": {escape_markdown(gate.description)}"
        gates.append(Markdown(f"{label}; " + "; ".join(parts)))
        machines += [(_hardware(r.hardware), _versions(r.versions)) for r in records]
    workloads = []
    for workload in manifest.workload:
        points = measured.points(workload_id=workload.id)
        if not points:
            continue
        dates = sorted(p.entry.record.started_at[:10] for p in points)
        text = (f"**{escape_markdown(workload.label or workload.id)}**: prompts {code_span(workload.prompts)}, "
                + escape_markdown(f"output {'exactly ' if workload.ignore_eos else 'up to '}{workload.output_len} "
                                  f"tokens, thinking {'on' if workload.thinking else 'off'}, {_sampling(workload)}, "
                                  f"{workload.repeats} "
                                  f"repeats, concurrency {', '.join(map(str, workload.concurrency))}, configs "
                                  f"{', '.join(workload.speculative)}; measured {_dates(dates)}"))
        workloads.append(Markdown(text))
        machines += [(_hardware(p.entry.record.hardware), _versions(p.entry.record.versions)) for p in points]
    environments = [escape_markdown(f"{hardware}; {versions}") for hardware, versions in dict.fromkeys(machines)]
    return {"gates": gates, "workloads": workloads, "environments": environments}


def _count(value: float) -> str:
    """A token count as the seeds write it: 354k, 1.2M, or the number itself below 10,000."""
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    return f"{value:.0f}"


def _sampling(workload: Workload) -> str:
    if not workload.temperature:
        return "greedy"
    return f"temperature {workload.temperature:g}" + (f", top-p {workload.top_p:g}" if workload.top_p else "")


def _seeds(gate: Gate) -> str:
    if gate.seeds is None:
        return f"seed {gate.seed}"
    return f"seeds {', '.join(map(str, gate.seeds))} (one run each, items averaged over them)"


def _thresholds(gate: Gate) -> str:
    if gate.is_fidelity:
        return ", ".join(f"{name} {value:g}" for name, value in (("max KL", gate.max_kl),
                                                                 ("max flip rate", gate.max_flip_rate))
                         if value is not None)
    return (f"margin {gate.margin:g}" + (f", floor {gate.floor:g}" if gate.floor is not None else "")
            + (f", minimum recovery {gate.min_recovery:g}" if gate.min_recovery else ""))


def _dates(dates: list[str]) -> str:
    return dates[0] if dates[0] == dates[-1] else f"{dates[0]} {DASH} {dates[-1]}"


def _harness(harness: str, versions: Mapping[str, str]) -> str:
    if harness == "lm-eval":
        return f"lm-eval {versions.get('lm_eval', '(version not recorded)')}"
    if harness == "vllm-bench":
        return f"vllm bench serve {versions.get('vllm', '')}".strip()
    if harness == "fidelity":
        return f"prompt logprobs through vLLM {versions.get('vllm', '')}".strip()
    return "custom harness"


def _hardware(info: Mapping[str, Any]) -> str:
    gpus = info.get("gpus")
    if isinstance(gpus, list) and gpus:
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)})
        return f"{len(gpus)}{TIMES} {', '.join(names)}"
    return f"{info.get('cpu', 'unknown CPU')} ({info.get('cpu_count', '?')} cores)"


def _versions(versions: Mapping[str, str]) -> str:
    named = [f"{k} {versions[k]}" for k in ("vllm", "lm_eval", "hfrelease", "torch", "transformers") if k in versions]
    if "lock_sha256" in versions:  # the release workflow's locked environment (hfrelease.ledger.provenance)
        named.append(f"installed from {versions.get('lock', 'a lock file')} (sha256 {versions['lock_sha256'][:12]})")
    return ", ".join(named)


def _links(manifest: Manifest, artifact: Artifact, view: _View) -> Context:
    family = [{"name": view.name(a), "kind": escape_markdown(a.kind), "self": a.id == artifact.id,
               "published": a.publish} for a in manifest.artifact if view.shown(a)]
    tools = []
    if artifact.quantization:
        q = artifact.quantization
        tools.append(escape_markdown(f"Quantized with {q.tool} {q.tool_version} ({q.format} format)"))
    if artifact.draft and artifact.draft.trained_with:
        tools.append(escape_markdown(f"Trained with {artifact.draft.trained_with}"))
    return {"family": family, "tools": tools}


def repo_exists(manifest: Manifest, artifact: Artifact) -> bool:
    """Whether `artifact`'s Hub repo exists for readers: this release publishes it, or it is the family's
    base model or a Hub source (someone else published it). A link to any other repo would be dead."""
    sources = {a.source.hub for a in manifest.artifact if a.source.hub}
    return artifact.publish or artifact.repo == manifest.family.base_model or artifact.repo in sources


def _bunched(p: SpeedPoint, name: str) -> bool:
    tpot = p.metrics.get("tpot_median_ms")
    spread = p.entry.record.extra.get("spread")
    pair = spread.get(name) if isinstance(spread, dict) else None
    lowest = min([p.metrics[name]] + ([float(v) for v in pair if isinstance(v, int | float)]
                                      if isinstance(pair, list) else []))
    # Below 0.005 ms it would print as 0.00 whatever TPOT says (the lint refuses a 0.00 ITL): never a number.
    return lowest < 0.005 or (tpot is not None and tpot > 0 and lowest < 0.1 * tpot)


def _sections(inputs: CardInputs, artifact: Artifact) -> dict[str, Markdown]:
    family = inputs.sections.get(FAMILY, {})
    own = inputs.sections.get(artifact.id, {})
    return {name: prose(own.get(name, family.get(name, ""))) for name in SECTION_NAMES}
