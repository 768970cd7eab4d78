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
from hfrelease.cards.errors import CardError
from hfrelease.cards.inputs import FAMILY, SECTION_NAMES, CardInputs
from hfrelease.cards.measurements import NONE, FamilyMeasurements, GateResult, SpeedPoint
from hfrelease.cards.memory import figures as memory_figures
from hfrelease.cards.memory import gibibytes
from hfrelease.cards.numbers import NumberRegistry, fixed, gigabytes, signed
from hfrelease.cards.plots import PlotData, plan_plots
from hfrelease.cards.serving import download_command, serving_context
from hfrelease.cards.text import Markdown, code_block, code_span, escape_markdown, hub_url, link, prose
from hfrelease.manifest import Artifact, Gate, Manifest

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
    view = _View(manifest, measured, numbers)
    plots = plan_plots(manifest, measured, artifact)
    context: Context = {
        "artifact": _artifact(manifest, artifact),
        "family": _family(manifest),
        "headline": view.headline(artifact),
        "quality": view.quality(artifact),
        "matrix": view.matrix(artifact),
        "speed": view.speed(artifact),
        "load": view.load(artifact),
        "acceptance": view.acceptance(artifact),
        "serving": serving_context(manifest, measured, artifact),
        "download": code_block(download_command(artifact), language="bash"),
        "creation": _creation(artifact),
        "training": _training(inputs, artifact),
        "choose": view.choose(artifact),
        "provenance": _provenance(manifest, measured, artifact),
        "links": _links(manifest, artifact),
        "citation": {"bibtex": code_block(citation.bibtex(manifest, artifact), language="bibtex")},
        "sections": _sections(inputs, artifact),
        # Every kind present, None without data: a family whose reference has nothing to compare with (a
        # reference and a draft) has no quality plot, and the template asks for it by name.
        "plots": {**dict.fromkeys(("load", "acceptance", "quality")), **{p.kind: p.path for p in plots}},
    }
    context["numbers"] = [
        {"id": code_span(r.id), "label": escape_markdown(r.label), "text": Markdown(r.text),
         "records": Markdown("<br>".join(code_span(n) for n in r.records))}
        for r in numbers.rows
    ]
    age = numbers.date_range()
    context["age"] = {"oldest": Markdown(age[0]), "newest": Markdown(age[1])} if age else None
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

    def __init__(self, manifest: Manifest, measured: FamilyMeasurements, numbers: NumberRegistry) -> None:
        self.manifest = manifest
        self.measured = measured
        self.numbers = numbers
        self.percent = {g.id: self._is_fraction(g) for g in manifest.gate}

    def _is_fraction(self, gate: Gate) -> bool:
        values = [r.value for (_, gid), r in self.measured.gates.items() if gid == gate.id and r.value is not None]
        return bool(values) and all(0.0 <= v <= 1.0 for v in values)

    # -- quality -------------------------------------------------------------------------------------------
    def value(self, result: GateResult) -> Markdown:
        assert result.value is not None
        scale, places = (100.0, 1) if self.percent[result.gate.id] else (1.0, 3)
        return self.numbers.add(f"gate.{result.gate.id}.{result.artifact_id}.value",
                                f"{result.gate.label or result.gate.id} on {result.artifact_id}",
                                fixed(result.value * scale, places), [result.entry])

    def delta(self, result: GateResult) -> tuple[Markdown, Markdown] | None:
        comparison = result.comparison
        if comparison is None:
            return None
        scale, places = (100.0, 1) if self.percent[result.gate.id] else (1.0, 3)
        base = f"gate.{result.gate.id}.{result.artifact_id}"
        label = f"{result.gate.label or result.gate.id} on {result.artifact_id} vs the reference"
        delta = self.numbers.add(f"{base}.delta", f"{label}: delta", signed(comparison.delta * scale, places),
                                 result.records)
        low = self.numbers.add(f"{base}.ci_low", f"{label}: CI low", signed(comparison.ci_low * scale, places),
                               result.records)
        high = self.numbers.add(f"{base}.ci_high", f"{label}: CI high", signed(comparison.ci_high * scale, places),
                                result.records)
        return delta, Markdown(f"{low} to {high}")

    def n(self, result: GateResult) -> Markdown:
        return self.numbers.add(f"gate.{result.gate.id}.{result.artifact_id}.n",
                                f"{result.gate.label or result.gate.id} on {result.artifact_id}: samples",
                                str(result.entry.record.n), [result.entry])

    def unit(self, gate: Gate) -> str:
        return "points" if self.percent[gate.id] else escape_markdown(gate.metric)

    def quality(self, artifact: Artifact) -> Context | None:
        gates = [g for g in self.manifest.gate if self.measured.gate(artifact.id, g.id) is not None]
        if artifact.kind == "draft" or not gates:
            return None
        reference = self.manifest.reference
        rows = []
        for gate in gates:
            result = self.measured.gate(artifact.id, gate.id)
            assert result is not None
            ref = self.measured.gate(reference.id, gate.id)
            rows.append(self._quality_row(gate, result, ref))
        return {"rows": rows, "confidence": _CONFIDENCE, "is_reference": artifact.kind == "reference"}

    def _quality_row(self, gate: Gate, result: GateResult, ref: GateResult | None) -> Context:
        record = result.entry.record
        settings = _settings(gate, record.generation, record.versions, record.harness)
        row: Context = {"label": escape_markdown(gate.label or gate.id), "mode": escape_markdown(gate.mode),
                        "settings": code_span(settings), "metric": code_span(gate.metric),
                        "verdict": escape_markdown(result.verdict), "void": result.value is None,
                        "reason": escape_markdown(result.reason), "unit": self.unit(gate)}
        if result.value is None:
            return {**row, "value": None, "reference": None, "delta": None, "ci": None, "n": None}
        delta = self.delta(result)
        ref_value = self.value(ref) if ref is not None and ref.value is not None else None
        return {**row, "value": self.value(result), "reference": ref_value,
                "delta": delta[0] if delta else None, "ci": delta[1] if delta else None, "n": self.n(result)}

    def matrix(self, artifact: Artifact) -> Context | None:
        if not self.manifest.gate:
            return None
        rows = []
        for other in self.manifest.artifact:
            cells = []
            for gate in self.manifest.gate:
                result = self.measured.gate(other.id, gate.id)
                if result is None:
                    cells.append(Markdown("n/a"))
                elif result.value is None:
                    cells.append(Markdown("void"))
                else:
                    delta = self.delta(result)
                    cells.append(Markdown(f"{self.value(result)} ({delta[0]})" if delta else self.value(result)))
            if all(c == "n/a" for c in cells):
                continue  # drafts: lossless, never gated
            rows.append({"name": link(other.title or other.repo, hub_url(other.repo)), "self": other.id == artifact.id,
                         "cells": cells})
        gates = [escape_markdown(g.label or g.id) for g in self.manifest.gate]
        return {"gates": gates, "rows": rows}

    def headline(self, artifact: Artifact) -> list[Markdown]:
        lines: list[Markdown] = []
        size = self.size(artifact)
        reference = self.manifest.reference
        if size is not None:
            ref_size = self.size(reference) if artifact.kind not in {"reference", "draft"} else None
            lines.append(Markdown(f"Weights: {size} GB" + (f" (reference: {ref_size} GB)" if ref_size else "")))
        if artifact.kind not in ("reference", "draft"):
            for gate in self.manifest.gate:
                result = self.measured.gate(artifact.id, gate.id)
                if result is None:
                    continue
                delta = self.delta(result)
                label = escape_markdown(gate.label or gate.id)
                if delta is None:
                    verdict, reason = escape_markdown(result.verdict), escape_markdown(result.reason)
                    lines.append(Markdown(f"{label}: {verdict} ({reason})"))
                    continue
                lines.append(Markdown(f"{label}: {delta[0]} {self.unit(gate)} vs the reference (CI {delta[1]}, "
                                      f"n={self.n(result)}): {escape_markdown(result.verdict)}"))
        for workload in self.manifest.workload:
            best = self._best_for(artifact, workload.id)
            if best is None:
                continue
            text = (f"{escape_markdown(workload.label or workload.id)}: {self.tps(best)} tok/s batch-1 with "
                    f"{code_span(best.speculative)}")
            if best.speedup is not None:
                text += f" ({self.speedup(best)}{TIMES} over no speculation)"
            lines.append(Markdown(text))
        return lines

    def _best_for(self, artifact: Artifact, workload_id: str) -> SpeedPoint | None:
        if artifact.kind != "draft":
            return self.measured.best_batch1(artifact.id, workload_id)
        mine = [p for p in self.measured.points(workload_id=workload_id, draft_id=artifact.id) if p.concurrency == 1]
        return max(mine, key=lambda p: p.throughput, default=None)

    def size(self, artifact: Artifact) -> Markdown | None:
        found = self.measured.sizes.get(artifact.id)
        if found is None:
            return None
        return self.numbers.add(f"size.{artifact.id}", f"weights of {artifact.id} (GB)", gigabytes(found[0]),
                                [found[1]])

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
            serve = self.numbers.add(
                f"memory.{artifact.id}.serve",
                f"memory to serve {artifact.id}: weights + KV cache of one {found.max_model_len}-token request (GiB)",
                gibibytes(found.serve_bytes), sources)
        peak = absent
        if found.peak_bytes is not None:
            peak = self.numbers.add(f"memory.{artifact.id}.peak",
                                    f"peak host RAM (PSS) of the server processes of {artifact.id} (GiB)",
                                    gibibytes(found.peak_bytes), [found.entry])
        return serve, peak

    # -- speed -----------------------------------------------------------------------------------------------
    def _point_id(self, p: SpeedPoint) -> str:
        return f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}"

    def metric(self, p: SpeedPoint, name: str, places: int, label: str) -> Markdown | None:
        if name not in p.metrics:
            return None
        return self.numbers.add(f"{self._point_id(p)}.{name}", f"{label}, {p.workload.id} on {p.artifact_id}, "
                                f"{p.speculative}, concurrency {p.concurrency}", fixed(p.metrics[name], places),
                                [p.entry])

    def failed(self, p: SpeedPoint) -> Markdown:
        failed = p.entry.record.extra.get("failed")
        if isinstance(failed, bool) or not isinstance(failed, int):
            return Markdown("not recorded")
        return self.numbers.add(f"{self._point_id(p)}.failed", f"failed requests, {p.workload.id} on "
                                f"{p.artifact_id}, {p.speculative}, concurrency {p.concurrency}", str(failed),
                                [p.entry])

    def tps(self, p: SpeedPoint) -> Markdown:
        text = self.metric(p, "output_throughput", 1, "output tok/s")
        assert text is not None
        return text

    def speedup(self, p: SpeedPoint) -> Markdown | None:
        if p.speedup is None:
            return None
        return self.numbers.add(f"{self._point_id(p)}.speedup", f"speedup of {p.speculative} over none, "
                                f"{p.workload.id} on {p.artifact_id}, concurrency {p.concurrency}",
                                fixed(p.speedup, 2), p.records)

    def _speed_row(self, p: SpeedPoint, best: SpeedPoint | None) -> Context:
        return {"config": code_span(p.speculative), "artifact": escape_markdown(p.artifact_id),
                "tps": self.tps(p), "speedup": self.speedup(p),
                "itl": self.metric(p, "itl_median_ms", 2, "ITL median ms"),
                "ttft": self.metric(p, "ttft_median_ms", 1, "TTFT median ms"),
                "mal": self.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                "best": best is not None and p.entry.name == best.entry.name}

    def speed(self, artifact: Artifact) -> Context:
        workloads = []
        for workload in self.manifest.workload:
            if artifact.kind == "draft":
                mine = [p for p in self.measured.points(workload_id=workload.id, draft_id=artifact.id)
                        if p.concurrency == 1]
                points = [q for p in mine for q in ([p.baseline] if p.baseline else []) + [p]]
            else:
                points = [p for p in self.measured.points(artifact_id=artifact.id, workload_id=workload.id)
                          if p.concurrency == 1]
            if not points:
                continue
            best = self._best_for(artifact, workload.id)
            workloads.append({
                "label": escape_markdown(workload.label or workload.id), "id": escape_markdown(workload.id),
                "output_len": workload.output_len, "thinking": workload.thinking, "ignore_eos": workload.ignore_eos,
                "rows": [self._speed_row(p, best) for p in points],
                "best": code_span(best.speculative) if best else None,
            })
        return {"measured": bool(workloads), "workloads": workloads, "by_artifact": artifact.kind == "draft"}

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
                tables.append({
                    "workload": escape_markdown(workload.label or workload.id), "config": code_span(spec),
                    "artifact": escape_markdown(artifact_id),
                    "rows": [{"concurrency": Markdown(str(p.concurrency)), "tps": self.tps(p),
                              "itl": self.metric(p, "itl_median_ms", 2, "ITL median ms"),
                              "itl_p90": self.metric(p, "itl_p90_ms", 2, "ITL p90 ms"),
                              "ttft": self.metric(p, "ttft_median_ms", 1, "TTFT median ms"),
                              "ttft_p90": self.metric(p, "ttft_p90_ms", 1, "TTFT p90 ms"),
                              "failed": self.failed(p)}
                             for p in sorted(series, key=lambda p: p.concurrency)],
                })
        return {"measured": bool(tables), "tables": tables}

    def acceptance(self, artifact: Artifact) -> Context:
        if artifact.kind == "draft":
            points = self.measured.points(draft_id=artifact.id)
        else:
            points = [p for p in self.measured.points(artifact_id=artifact.id) if p.speculative != NONE]
        points = [p for p in points if "spec_acceptance_rate" in p.metrics and p.concurrency == min(
            q.concurrency for q in points if q.workload.id == p.workload.id and q.speculative == p.speculative)]
        width = max((len(p.positions()) for p in points), default=0)
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
                "positions": unconditional + [Markdown("n/a")] * (width - len(unconditional)),
                "conditional": Markdown(" / ".join(conditional)) if conditional else Markdown("n/a"),
                "concurrency": p.concurrency,
            })
        return {"measured": bool(rows), "rows": rows, "positions": list(range(width)),
                "gates": self.draft_gates(artifact)}

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
    def choose(self, artifact: Artifact) -> Context:
        gates = [g for g in self.manifest.gate]
        workloads = [w for w in self.manifest.workload if 1 in w.concurrency]
        rows = []
        for other in self.manifest.artifact:
            what = other.quantization.scheme if other.quantization else (
                f"{other.draft.method} draft, k={other.draft.num_speculative_tokens}" if other.draft else other.kind)
            cells = []
            for gate in gates:
                result = self.measured.gate(other.id, gate.id)
                if other.kind == "draft":
                    cells.append(Markdown("lossless"))
                elif result is None:
                    cells.append(Markdown("n/a"))
                elif result.value is None:
                    cells.append(Markdown("void"))
                elif other.kind == "reference":
                    cells.append(Markdown(f"{self.value(result)} (reference)"))
                else:
                    delta = self.delta(result)
                    cells.append(delta[0] if delta else Markdown(escape_markdown(result.verdict)))
            speeds = []
            for workload in workloads:
                best = self._best_for(other, workload.id)
                speeds.append(Markdown(f"{self.tps(best)} ({code_span(best.speculative)})") if best
                              else Markdown("not measured"))
            size = self.size(other)
            serve, peak = self.memory(other)
            rows.append({"name": link(other.title or other.repo, hub_url(other.repo)), "self": other.id == artifact.id,
                         "what": code_span(what), "size": size or Markdown("not measured"), "quality": cells,
                         "speed": speeds, "published": other.publish, "memory": serve, "peak": peak})
        return {"gates": [escape_markdown(g.label or g.id) for g in gates],
                "units": [self.unit(g) for g in gates],
                "workloads": [escape_markdown(w.label or w.id) for w in workloads], "rows": rows}


def _settings(gate: Gate, generation: Mapping[str, Any], versions: Mapping[str, str], harness: str) -> str:
    parts = [f"{harness} {versions.get('lm_eval', '')}".strip() if harness == "lm-eval" else harness]
    parts.append(gate.task or gate.id)
    parts.append(gate.api)
    for key in ("max_tokens", "temperature", "top_p", "num_fewshot", "limit"):
        value = generation.get(key)
        if value is not None:
            parts.append(f"{key}={value}")
    parts.append(f"seed={gate.seed}")
    return ", ".join(parts)


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


def _training(inputs: CardInputs, artifact: Artifact) -> Context | None:
    d = artifact.draft
    if d is None:
        return None
    files = inputs.files.get(artifact.id, {})
    command = files.get("train_command.txt")
    epochs = _val_metrics(files["val_metrics.json"], artifact) if "val_metrics.json" in files else None
    return {
        "method": code_span(d.method), "k": d.num_speculative_tokens,
        "target": _target_link(inputs.manifest, artifact),
        "aux": code_span(json.dumps(d.aux_hidden_state_layer_ids)) if d.aux_hidden_state_layer_ids else None,
        "vocab": d.draft_vocab_size,
        "trained_with": escape_markdown(d.trained_with) if d.trained_with else None,
        "command": code_block(command, language="bash") if command is not None else None,
        "epochs": epochs,
    }


def _val_metrics(text: str, artifact: Artifact) -> Context:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardError(f"val_metrics.json of artifact {artifact.id!r} is not JSON: {exc}",
                        hint='It holds a list of per-epoch objects, e.g. [{"epoch": 1, "val_acceptance": 0.5}].',
                        ) from exc
    if isinstance(data, dict):
        data = [{"epoch": k, **v} for k, v in data.items() if isinstance(v, dict)]
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise CardError(f"val_metrics.json of artifact {artifact.id!r} is not a list of per-epoch objects",
                        hint="Write it as [{\"epoch\": 1, \"val_acceptance\": 0.5}, ...].")
    columns: list[str] = []
    for row in data:
        columns += [k for k in row if k not in columns]

    def cell(value: object) -> Markdown:
        if isinstance(value, float):
            return Markdown(f"{value:.4g}")
        return escape_markdown(value if value is not None else "")

    return {"columns": [escape_markdown(c) for c in columns],
            "rows": [[cell(row.get(c)) for c in columns] for row in data]}


def _provenance(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> Context:
    gates = []
    for gate in manifest.gate:
        results = [r for (aid, gid), r in measured.gates.items() if gid == gate.id]
        if not results:
            continue
        records = [r.entry.record for r in results]
        ns = sorted({r.n for r in records})
        dates = sorted(r.started_at[:10] for r in records)
        gates.append({
            "label": escape_markdown(gate.label or gate.id),
            "description": escape_markdown(gate.description) if gate.description else None,
            "harness": escape_markdown(_harness(records[0].harness, records[0].versions)),
            "task": code_span(gate.task or " ".join(gate.command or []) or gate.entry_point or gate.id),
            "metric": code_span(gate.metric), "mode": escape_markdown(gate.mode),
            "n": escape_markdown("/".join(map(str, ns)) + (f" (limit {gate.limit})" if gate.limit else " (full set)")),
            "seed": gate.seed, "budget": gate.max_tokens, "temperature": gate.temperature,
            "hardware": escape_markdown(_hardware(records[0].hardware)),
            "versions": escape_markdown(_versions(records[0].versions)),
            "dates": escape_markdown(dates[0] if dates[0] == dates[-1] else f"{dates[0]} {DASH} {dates[-1]}"),
            "margin": gate.margin,
        })
    workloads = []
    for workload in manifest.workload:
        points = measured.points(workload_id=workload.id)
        if not points:
            continue
        record = points[0].entry.record
        dates = sorted(p.entry.record.started_at[:10] for p in points)
        workloads.append({
            "label": escape_markdown(workload.label or workload.id), "prompts": code_span(workload.prompts),
            "output_len": workload.output_len, "thinking": "on" if workload.thinking else "off",
            "repeats": workload.repeats, "concurrency": escape_markdown(", ".join(map(str, workload.concurrency))),
            "configs": escape_markdown(", ".join(workload.speculative)),
            "hardware": escape_markdown(_hardware(record.hardware)),
            "versions": escape_markdown(_versions(record.versions)),
            "dates": escape_markdown(dates[0] if dates[0] == dates[-1] else f"{dates[0]} {DASH} {dates[-1]}"),
        })
    return {"gates": gates, "workloads": workloads}


def _harness(harness: str, versions: Mapping[str, str]) -> str:
    if harness == "lm-eval":
        return f"lm-eval {versions.get('lm_eval', '(version not recorded)')}"
    if harness == "vllm-bench":
        return f"vllm bench serve {versions.get('vllm', '')}".strip()
    return "custom harness"


def _hardware(info: Mapping[str, Any]) -> str:
    gpus = info.get("gpus")
    if isinstance(gpus, list) and gpus:
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)})
        return f"{len(gpus)}{TIMES} {', '.join(names)}"
    return f"{info.get('cpu', 'unknown CPU')} ({info.get('cpu_count', '?')} cores)"


def _versions(versions: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {versions[k]}" for k in ("vllm", "lm_eval", "hfrelease", "torch", "transformers")
                     if k in versions)


def _links(manifest: Manifest, artifact: Artifact) -> Context:
    family = [{"name": link(a.title or a.repo, hub_url(a.repo)), "kind": escape_markdown(a.kind),
               "self": a.id == artifact.id} for a in manifest.artifact]
    tools = []
    if artifact.quantization:
        q = artifact.quantization
        tools.append(escape_markdown(f"Quantized with {q.tool} {q.tool_version} ({q.format} format)"))
    if artifact.draft and artifact.draft.trained_with:
        tools.append(escape_markdown(f"Trained with {artifact.draft.trained_with}"))
    return {"family": family, "tools": tools}


def _sections(inputs: CardInputs, artifact: Artifact) -> dict[str, Markdown]:
    family = inputs.sections.get(FAMILY, {})
    own = inputs.sections.get(artifact.id, {})
    return {name: prose(own.get(name, family.get(name, ""))) for name in SECTION_NAMES}
