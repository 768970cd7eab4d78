"""The draft sections of a card: acceptance per draft position, the draft x target matrix, the draft
gates judged as the release judges them, and a draft's headline (which workloads it wins).

A draft serves inside its target's server, so its figures are its target's speed points served with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hfrelease.cards.acceptance_spread import (
    identical_outputs,
    identical_share,
    outputs_sentence,
    prompt_spread,
    with_interval,
)
from hfrelease.cards.measurements import NONE, SpeedPoint
from hfrelease.cards.numbers import TIMES, fixed
from hfrelease.cards.speed_tables import SpeedTables
from hfrelease.cards.text import Markdown, code_span, escape_markdown
from hfrelease.cards.view import CardView, Context
from hfrelease.manifest import Artifact

if TYPE_CHECKING:
    from hfrelease.speed.verdict import DraftCheck


class DraftTables:
    """The draft figures of a card, formatted with the speed tables' figures (one registry)."""

    def __init__(self, view: CardView, speed: SpeedTables) -> None:
        self.view = view
        self.speed = speed
        self.manifest = view.manifest
        self.measured = view.measured
        self.numbers = view.numbers

    def headline(self, artifact: Artifact) -> list[Markdown]:
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
            verdict = self.speed.verdict(target.id, workload.id)
            best = verdict.point if verdict is not None else None
            point = mine[0]
            if verdict is not None and best is not None and best.entry.name == point.entry.name:
                tps = self.speed.tps(point, unit="tok/s batch-1")
                lines.append(Markdown(f"{label}: fastest config on {escape_markdown(target.id)}, "
                                      f"{tps}, {self.speed.speedup(point)} over no "
                                      "speculation" + ("" if verdict.clear else f"; {self.speed.not_clear(verdict)}")))
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

    def pairings(self, artifact: Artifact) -> Context:
        """The draft x target matrix (`Draft.matrix`): on a draft's card, its batch-1 points on every target it
        was measured against, per workload, with a recommendation; on a target's card, the matrix drafts
        measured against it, linked to their cards."""
        if artifact.draft is None:
            drafts = [d for d in self.manifest.artifact if d.draft is not None and d.draft.matrix and self.view.shown(d)
                      and d.draft.target != artifact.id and self.measured.points(artifact_id=artifact.id,
                                                                                 draft_id=d.id)]
            return {"draft": False, "measured": False,
                    "links": Markdown(", ".join(self.view.name(d) for d in drafts)) if drafts else None}
        if not artifact.draft.matrix:
            return {"draft": True, "measured": False, "links": None}
        tables = []
        for workload in self.manifest.workload:
            points = [p for p in self.measured.points(workload_id=workload.id, draft_id=artifact.id)
                      if p.concurrency == min(workload.concurrency) and self.view.shown(
                          self.manifest.artifact_by_id(p.artifact_id))]
            if not points:
                continue
            order = {a.id: i for i, a in enumerate(self.manifest.artifact)}
            points.sort(key=lambda p: (order[p.artifact_id], p.speculative))
            paying = [p for p in points if p.speedup is not None and p.speedup > 1.0]
            caveats = {p.entry.name: self._caveat(p) for p in paying}
            best = max((p for p in paying if caveats[p.entry.name] is None), key=lambda p: p.speedup or 0.0,
                       default=None)
            rows = [{"target": self.view.name(self.manifest.artifact_by_id(p.artifact_id), short=True),
                     "config": code_span(p.speculative),
                     "mal": self.speed.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                     "positions": Markdown(positions_cell([
                         self.numbers.add(f"{self.speed.point_id(p)}.pos{i}", f"acceptance at draft position {i}, "
                                          f"{p.workload.id} on {p.artifact_id}, {p.speculative}", fixed(v, 2),
                                          [p.entry]) for i, v in p.positions()]) or "n/a"),
                     "speedup": self.speed.speedup(p),
                     "pairing": Markdown("**recommended**" if p is best else
                                         f"pays; {caveats[p.entry.name]}" if caveats.get(p.entry.name) else
                                         "pays" if p in paying else
                                         "no speedup measured" if p.speedup is None else "slower than none")}
                    for p in points]
            tables.append({"workload": escape_markdown(workload.label or workload.id),
                           "concurrency": min(workload.concurrency), "rows": rows})
        return {"draft": True, "measured": bool(tables), "tables": tables, "links": None,
                "trained": escape_markdown(artifact.draft.target)}

    def _caveat(self, p: SpeedPoint) -> str | None:
        """Why a paying pairing is not recommended, or None: the reference served alone (no speculation) is
        faster, or another config is faster on the same target there, or the target's speed verdict says it
        is not a clear win (one verdict per workload and config on every card)."""
        reference = self.measured.speed.get((self.manifest.reference.id, p.workload.id, NONE, p.concurrency))
        if reference is None:
            return "the reference alone not measured"
        if reference.throughput >= p.throughput:
            return "the reference alone is faster"
        rivals = [q for q in self.measured.points(artifact_id=p.artifact_id, workload_id=p.workload.id)
                  if q.concurrency == p.concurrency and q.speculative != p.speculative and q.throughput > p.throughput]
        if rivals:
            return f"{code_span(max(rivals, key=lambda q: q.throughput).speculative)} is faster on it"
        verdict = self.speed.verdict(p.artifact_id, p.workload.id) if p.concurrency == 1 else None
        if verdict is not None and verdict.point.entry.name == p.entry.name and not verdict.clear:
            return "not a clear win"
        return None

    def acceptance(self, artifact: Artifact) -> Context:
        if artifact.kind == "draft":
            points = self.measured.points(draft_id=artifact.id)
        else:
            points = [p for p in self.measured.points(artifact_id=artifact.id) if p.speculative != NONE]
        points = [p for p in points if self.view.shown_point(p)]
        points = [p for p in points if "spec_acceptance_rate" in p.metrics and p.concurrency == min(
            q.concurrency for q in points if q.workload.id == p.workload.id and q.speculative == p.speculative)]
        rows = []
        for p in points:
            unconditional = [with_interval(self.numbers, p, f"spec_acceptance_pos_{i}", self.numbers.add(
                f"{self.speed.point_id(p)}.pos{i}", f"acceptance at draft position {i}, {p.workload.id} on "
                f"{p.artifact_id}, {p.speculative}", fixed(v, 2), [p.entry]), f"acceptance at draft position {i}")
                for i, v in p.positions()]
            conditional = [self.numbers.add(f"{self.speed.point_id(p)}.cpos{i}", f"conditional acceptance at draft "
                                            f"position {i}, {p.workload.id} on {p.artifact_id}, {p.speculative}",
                                            fixed(v, 2), [p.entry])
                           for i, v in p.positions("spec_conditional_acceptance_pos_")]
            rows.append({
                "label": Markdown(f"{escape_markdown(p.workload.label or p.workload.id)}, {code_span(p.speculative)}"
                                  + (f" on {escape_markdown(p.artifact_id)}" if artifact.kind == "draft" else "")),
                "rate": self._with_interval(p, "spec_acceptance_rate", "acceptance rate"),
                "spread": prompt_spread(self.numbers, p),
                "identical": identical_outputs(self.numbers, p) if p.speculative != NONE else Markdown("n/a"),
                "mal": self.speed.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                "positions": Markdown(positions_cell(unconditional)) if unconditional else Markdown("n/a"),
                "conditional": Markdown(positions_cell(conditional)) if conditional else Markdown("n/a"),
                "concurrency": p.concurrency,
            })
        return {"measured": bool(rows), "rows": rows, "gates": self.draft_gates(artifact),
                "own_head": self.own_head_gates(artifact), "outputs": self.outputs(artifact)}

    def own_head_gates(self, artifact: Artifact) -> Context | None:
        """The gate of a head the artifact ships itself (native MTP: `min_acceptance_vs_reference`), judged as the
        release's merge job judges it from the card's own records: its batch-1 acceptance against the share of
        the reference's on the same workload and config. None where no such config served it."""
        if artifact.kind in ("draft", "reference"):
            return None
        from hfrelease.speed.result import row_from_record
        from hfrelease.speed.verdict import own_head_checks

        gated = {s.id: s.min_acceptance_vs_reference for s in self.manifest.speculative
                 if s.min_acceptance_vs_reference is not None}
        reference = self.manifest.reference.id
        points = {(p.artifact_id, p.workload.id, p.speculative): p for p in self.measured.points()
                  if p.speculative in gated and p.concurrency == 1 and p.input_len is None
                  and p.artifact_id in (artifact.id, reference)}
        if not any(a == artifact.id for a, _, _ in points):
            return None
        rows = [row_from_record(p.entry.record, origin="recorded") for p in points.values()]
        table = []
        for c in (c for c in own_head_checks(self.manifest, rows) if c.draft_id == artifact.id):
            mine, theirs = points[(artifact.id, c.workload_id, c.speculative)], points.get(
                (reference, c.workload_id, c.speculative))
            share = gated[c.speculative]
            bound = (self.numbers.add(f"{self.speed.point_id(mine)}.own_head_bound",
                                      f"the acceptance {c.speculative} must reach on {c.workload_id}: {share:g} x the "
                                      "reference's", fixed(c.threshold, 2),
                                      [mine.entry, *([theirs.entry] if theirs else [])])
                     if c.threshold is not None else Markdown("reference not measured"))
            table.append({
                "label": Markdown(f"{escape_markdown(mine.workload.label or mine.workload.id)}, "
                                  f"{code_span(c.speculative)}"),
                "rate": self._with_interval(mine, "spec_acceptance_rate", "acceptance rate") or Markdown(
                    "not measured"),
                "reference": (self._with_interval(theirs, "spec_acceptance_rate", "acceptance rate")
                              if theirs else None) or Markdown("not measured"),
                # Short (the table must fit the card column): the paragraph above names the manifest key.
                "required": Markdown(f"{bound} ({share:g}{TIMES})"),
                "verdict": Markdown("pass" if c.verdict == "pass" else "**fail**"),
            })
        return {"rows": table, "passed": all(r["verdict"] == "pass" for r in table), "reference": reference}

    def _judged_speedup(self, check: DraftCheck, p: SpeedPoint, served: list[SpeedPoint]) -> Markdown | None:
        """The speedup gate's cell: the batch-1 speedup or, where the gate's figure is another point's (the
        lowest over the workload's points) or a bound between sessions, that figure and the point it was
        judged at (every number registered: the card lint traces each one of a measured block)."""
        batch1 = self.speed.speedup(p)
        if batch1 is None or check.judged is None:
            return batch1
        same = [q for q in served if (q.workload.id, q.speculative) == (p.workload.id, p.speculative)
                and q.speedup is not None]
        lowest = min(same, key=lambda q: q.speedup or 0.0, default=p)
        if lowest is p and check.judged_over is None:
            return batch1
        at = ""
        if lowest.input_len:
            at = " at input " + self.numbers.add(f"{self.speed.point_id(lowest)}.input_len",
                                                 f"input tokens, {lowest.workload.id} on {lowest.artifact_id}",
                                                 str(lowest.input_len), [lowest.entry]) + " tokens"
        elif lowest is not p:
            at = " at concurrency " + self.numbers.add(f"{self.speed.point_id(lowest)}.concurrency",
                                                       f"concurrency, {lowest.workload.id} on {lowest.artifact_id}",
                                                       str(lowest.concurrency), [lowest.entry])
        over = ", lower bound between sessions" if check.judged_over == "sessions" else ""
        figure = self.numbers.add(
            f"{self.speed.point_id(p)}.speedup_gate", f"speedup gate's figure of {p.speculative} on {p.workload.id}"
            f"{over} (the lowest over the workload's points)", fixed(check.judged, 2),
            [e for q in same for e in q.records])
        # Kept short (the table must fit the card column): the paragraph above says what the figure is.
        return Markdown(f"{figure}{TIMES}{at}")

    def _with_interval(self, p: SpeedPoint, name: str, label: str) -> Markdown | None:
        value = self.speed.metric(p, name, 2, label)
        return with_interval(self.numbers, p, name, value, label) if value is not None else None

    def _on_target(self, artifact: Artifact) -> tuple[list[SpeedPoint], str]:
        assert artifact.draft is not None
        target = artifact.draft.target
        points = self.measured.points(draft_id=artifact.id)
        return [p for p in points if p.concurrency == 1 and p.artifact_id == target], escape_markdown(target)

    def outputs(self, artifact: Artifact) -> Markdown | None:
        """A draft's losslessness as measured (`acceptance_spread.outputs_sentence`); None for other kinds."""
        if artifact.draft is None:
            return None
        return outputs_sentence(self.numbers, artifact.id, *self._on_target(artifact))

    def outputs_cell(self, artifact: Artifact) -> Markdown:
        """The choose table's quality cell of a draft: its measured share of unchanged outputs."""
        found = identical_share(self.numbers, artifact.id, *self._on_target(artifact)) if artifact.draft else None
        if found is None:
            return Markdown("outputs not compared")
        return Markdown(f"outputs = its target's on {found[0]} prompts")

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
            found.append((label, [(i, self.numbers.add(f"{self.speed.point_id(p)}.pos{i}", f"acceptance at draft "
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
        # acceptance table above also shows it served with other artifacts (`eval --speed`). The speedup gate
        # is judged at every point served with the draft (each concurrency, each context length) against the
        # host's session noise, as `hfrelease.speed.drafts.judge_draft` judges it.
        target = artifact.draft.target
        served = [p for p in [*self.measured.points(draft_id=artifact.id), *self.measured.sweep.values()]
                  if p.artifact_id == target and p.entry.record.draft_artifact_id == artifact.id]
        points = {(p.artifact_id, p.workload.id, p.speculative): p for p in served
                  if p.concurrency == 1 and p.input_len is None}
        rows = [replace(row_from_record(p.entry.record, origin="recorded"), speedup=p.speedup) for p in served]
        checks = [c for c in draft_checks(self.manifest, rows, self.measured.noise) if c.draft_id == artifact.id]
        d = artifact.draft
        names = {"target": "served with its target", "acceptance": "acceptance rate",
                 "acceptance-length": "mean acceptance length", "speedup": "speedup over no speculation",
                 "identical-outputs": "outputs equal to no speculation's"}
        required = {"target": f"target = {d.target}", "acceptance": f"min_acceptance_rate = {d.min_acceptance_rate:g}"
                    if d.min_acceptance_rate is not None else "measured",
                    "acceptance-length": f"min_acceptance_length = {d.min_acceptance_length:g}"
                    if d.min_acceptance_length is not None else "",
                    "speedup": f"min_speedup = {d.min_speedup:g}" if d.min_speedup is not None else "",
                    "identical-outputs": f"min_identical_outputs = {d.min_identical_outputs:g}"
                    if d.min_identical_outputs is not None else ""}
        table = []
        for c in checks:
            p = points[(c.artifact_id, c.workload_id, c.speculative)]
            value: Markdown | None
            if c.check == "target":
                value = code_span(c.artifact_id)
            elif c.check == "speedup":
                value = self._judged_speedup(c, p, served)
            elif c.check == "identical-outputs":
                value = identical_outputs(self.numbers, p) if c.value is not None else None
            elif c.check == "acceptance":
                # The rate with its interval over prompts, whose lower bound the gate judged (said above the
                # table: a longer cell made the table wider than the card column).
                value = self._with_interval(p, "spec_acceptance_rate", names[c.check])
            else:
                value = self.speed.metric(p, "spec_mean_acceptance_length", 2, names[c.check])
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


# Positions a by-position cell shows before it elides the middle: suffix decoding's 8 (the demo's) made the
# acceptance table about 123 characters wide, past the card column's 100 (the render job's lint stopped v0.1).
SHOWN_POSITIONS = 4


def positions_cell(values: Sequence[str]) -> str:
    """Per-position figures joined "a / b / c / d"; beyond `SHOWN_POSITIONS`, the first three, an ellipsis and
    the last ("a / b / c / ... / h (last)": in words, since a digit in a measured block must trace to a record);
    every figure stays in the number provenance list."""
    if len(values) <= SHOWN_POSITIONS:
        return " / ".join(values)
    return " / ".join([*values[:SHOWN_POSITIONS - 1], "\u2026", f"{values[-1]} (last)"])
