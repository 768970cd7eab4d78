"""The card's choice table: one row per artifact of the family with one summary cell per question a
reader choosing among them asks (size, memory to serve, quality, batch-1 speed, when to pick it); the
tables below it hold the details.
"""

from __future__ import annotations

from hfrelease.cards.measurements import NONE, SpeedPoint
from hfrelease.cards.memory import figures as memory_figures
from hfrelease.cards.numbers import binary_size
from hfrelease.cards.summary import Summary
from hfrelease.cards.text import Markdown, code_span, escape_markdown, prose
from hfrelease.cards.view import Context, repo_exists
from hfrelease.manifest import Artifact, Workload


class ChooseTable(Summary):
    """The choice table of a card, summarising the figures of its sections (one registry)."""

    def main_workload(self) -> Workload | None:
        """The workload the family table compares speed on: the first one the manifest lists that runs at
        batch 1 and on which the reference was measured (the manifest's order says what matters most)."""
        reference = self.manifest.reference.id
        for workload in self.manifest.workload:
            if 1 in workload.concurrency and self.speed.best(reference, workload.id) is not None:
                return workload
        return None

    def table(self, artifact: Artifact) -> Context:
        """The compact choice table: one summary cell per question, details in the tables below it."""
        workload = self.main_workload()
        reference = self.manifest.reference
        ref_none = self._none_point(reference.id, workload.id) if workload else None
        rows, memory = [], []
        for other in self.manifest.artifact:
            if not self.view.shown(other):
                continue
            serve, peak = self.memory(other)
            size = self.view.size(other) or Markdown("not measured")
            rows.append({"name": self.view.name(other, short=True), "self": other.id == artifact.id,
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

    def _quality_summary(self, other: Artifact) -> Markdown:
        if other.kind == "draft":
            return Markdown("lossless")
        if other.kind == "reference":
            return Markdown("the reference")
        results = self.quality.gate_results(other)
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
        delta = self.quality.delta(worst)
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
            point = self.speed.best(other.id, workload.id)
        if point is None:
            return Markdown("not measured")
        text = str(self.speed.tps(point))
        if point.speculative != NONE:
            text += f" {code_span(point.speculative)}"
        if ref_none is not None and ref_none.throughput > 0 and not (other.kind == "reference"
                                                                     and point.speculative == NONE):
            text += f", {self.speed.vs_reference(point, ref_none, spread=False)}"
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
        results = self.quality.gate_results(other)
        failed = [escape_markdown(r.gate.label or r.gate.id) for r in results if r.verdict == "fail"]
        if failed:
            return Markdown("avoid: fails a gate")
        if not results or any(r.comparison is None for r in results):
            return Markdown("not judged against the reference yet")
        sizes = {a.id: self.measured.sizes[a.id][0] for a in self.manifest.artifact
                 if a.id in self.measured.sizes and a.kind in {"quant", "variant"} and self.view.shown(a)
                 and all(r.verdict == "pass" for r in self.quality.gate_results(a)) and self.quality.gate_results(a)}
        if other.id in sizes and sizes[other.id] == min(sizes.values()) and len(sizes) > 1:
            return Markdown("smallest that passes")
        return Markdown("passes, smaller weights" if other.kind == "quant" else "passes every gate")

    def _draft_when(self, other: Artifact) -> Markdown:
        assert other.draft is not None
        gates = self.drafts.draft_gates(other)
        if gates is not None and gates["measured"] and not gates["passed"]:
            return Markdown("avoid: draft gates fail")
        target = other.draft.target
        measured = [(w, v) for w in self.manifest.workload if (v := self.speed.verdict(target, w.id)) is not None]
        # Only a clear win counts (`BestVerdict`): the Speed section says "not a clear win" of the others.
        won = [escape_markdown(w.label or w.id) for w, v in measured
               if v.clear and v.point.entry.record.draft_artifact_id == other.id]
        unclear = [w for w, v in measured if not v.clear and v.point.entry.record.draft_artifact_id == other.id]
        # Several labels spelled out made the demo's table wider than the Hub's column (two of its workloads:
        # 103 characters, three: 104); the draft's headline and speed tables name them. Counts in words: a
        # digit in a measured block must trace to a record (the card lint), and a count is not a measurement.
        if len(won) > 1 and len(won) == len(measured):
            return Markdown("every workload measured")
        if len(won) > 1:
            return Markdown(f"{_count(len(won))} of {_count(len(measured))} workloads")
        if won:
            return Markdown(won[0])
        if unclear:
            return Markdown("no clear win yet")
        return Markdown("no workload yet: slower")

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


def _count(n: int) -> str:
    """A small count in words (the choice table's counts of workloads)."""
    words = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
    return words[n] if n < len(words) else "many"
