"""The card's choice table: one row per artifact of the family with one summary cell per question a
reader choosing among them asks (quality, batch-1 speed, memory to serve, size, when to pick it), ranked
by what the reader gets (`choice.py`), an artifact another beats on every column said to be dominated;
the tables below it hold the details.
"""

from __future__ import annotations

from hfrelease.cards.choice import FAILS, ORIGINAL, PASSES, Facts, best_of, dominated_by, rank_key
from hfrelease.cards.measurements import EMULATED, NONE, SpeedPoint
from hfrelease.cards.memory import MemoryFigures
from hfrelease.cards.memory import figures as memory_figures
from hfrelease.cards.numbers import binary_size
from hfrelease.cards.summary import Summary
from hfrelease.cards.text import Markdown, code_span, escape_markdown, prose
from hfrelease.cards.view import Context, repo_exists
from hfrelease.manifest import Artifact, Workload

# The mark of a draft's batch-1 cell measured on another workload than the table's (named under the table).
ELSEWHERE_MARK = "‡"


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
        """The compact choice table: one summary cell per question, details in the tables below it; the
        artifacts ranked by what a reader gets, drafts (add-ons to a target) last."""
        workload = self.main_workload()
        rows, memory, keys, elsewhere = [], [], [], []
        facts = self.facts(workload)
        for other in self.manifest.artifact:
            if not self.view.shown(other):
                continue
            serve, peak = self.memory(other)
            size = self.view.size(other) or Markdown("not measured")
            beaten = self.dominator(other, facts)
            speed, served_on = self._speed_summary(other, workload)
            if served_on is not None:
                elsewhere.append({"name": escape_markdown(other.repo.split("/")[1]), "workload": served_on})
            rows.append({"name": self.view.name(other, short=True), "self": other.id == artifact.id,
                         "published": other.publish,
                         "size": size, "memory": serve, "quality": self._quality_summary(other),
                         "speed": speed,
                         "when": self._choose_when(other, facts, beaten)})
            memory.append({"name": escape_markdown(other.title or other.repo), "self": other.id == artifact.id,
                           "size": size, "memory": serve, "peak": peak})
            own = facts.get(other.id)
            keys.append((1,) if own is None else (0, *rank_key(own, dominated=beaten is not None)))
        order = sorted(range(len(rows)), key=lambda i: keys[i])
        return {"rows": [rows[i] for i in order], "memory": memory,
                "workload": escape_markdown(workload.label or workload.id) if workload else None,
                "noise": self.measured.noise is not None,
                "elsewhere": elsewhere}

    def facts(self, workload: Workload | None) -> dict[str, Facts]:
        """What each shown artifact that is not a draft gives a reader, as numbers (`choice.Facts`)."""
        found = {}
        for other in self.manifest.artifact:
            if other.kind == "draft" or not self.view.shown(other):
                continue
            point = self.speed.best(other.id, workload.id) if workload else None
            spread = self.speed.spread(point, "output_throughput") if point else None
            tps = None if point is None else (point.throughput, *(spread or (point.throughput, point.throughput)))
            size = self.measured.sizes.get(other.id)
            figures = self._memory_figures(other)
            found[other.id] = Facts(artifact_id=other.id, published=other.publish, quality=self._quality_level(other),
                                    tps=tps, memory=figures.serve_bytes if figures else None,
                                    size=float(size[0]) if size else None)
        return found

    def dominator(self, artifact: Artifact, facts: dict[str, Facts]) -> Artifact | None:
        """The published artifact that beats `artifact` on every column of the table, if one does."""
        own = facts.get(artifact.id)
        beaten = dominated_by(own, facts.values(), self.measured.noise) if own is not None else None
        return self.manifest.artifact_by_id(beaten.artifact_id) if beaten is not None else None

    def _quality_level(self, other: Artifact) -> int | None:
        if other.kind == "reference":
            return ORIGINAL
        results = self.quality.gate_results(other)
        if any(r.verdict == "fail" for r in results):
            return FAILS
        if not results or any(r.comparison is None for r in results):
            return None
        return PASSES

    def _quality_summary(self, other: Artifact) -> Markdown:
        if other.kind == "draft":
            return self.drafts.outputs_cell(other)
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

    def _speed_summary(self, other: Artifact, workload: Workload | None) -> tuple[Markdown, Markdown | None]:
        """Batch-1 output tok/s on the main workload, served this artifact's best way, and the label of the
        workload it was measured on instead where that is another one (a draft never served on the main one).
        A draft's cell is its target served with it, and only when that is faster than the target without
        speculation: a pairing slower than no speculation is never advertised."""
        if workload is None:
            return Markdown("not measured"), None
        if other.kind == "draft":
            assert other.draft is not None
            points = self._draft_points(other, workload)
            if not points:
                return self._draft_speed_elsewhere(other, workload)
            if _slower(points):
                return Markdown("slower than its target alone"), None
            point = next((p for p in points if p.speedup is not None and p.speedup > 1), None)
        else:
            point = self.speed.best(other.id, workload.id)
        if point is None and any(p.emulated for p in self.measured.points(artifact_id=other.id,
                                                                          workload_id=workload.id)):
            return Markdown(EMULATED), None  # an emulation kernel's tok/s: in the speed tables, never compared
        if point is None:
            return Markdown("not measured"), None
        text = str(self.speed.tps(point, in_table=True))
        if point.speculative != NONE:
            text += f" {code_span(point.speculative)}"
        return Markdown(text), None

    def _draft_points(self, draft: Artifact, workload: Workload) -> list[SpeedPoint]:
        """The batch-1 points of `draft` served with its target on `workload`."""
        assert draft.draft is not None
        return [p for p in self.measured.points(workload_id=workload.id, draft_id=draft.id)
                if p.concurrency == 1 and p.artifact_id == draft.draft.target]

    def _draft_speed_elsewhere(self, draft: Artifact, main: Workload) -> tuple[Markdown, Markdown | None]:
        """A draft never served on the main workload (the demo's EAGLE-3 head is measured on its FP8 verifier's
        own workloads): its target's tok/s with it on the first workload where that is faster than the target
        alone (a clear win first, then the manifest's order), marked with `ELSEWHERE_MARK`, and that workload's
        label (named under the table); "not measured" when it was served nowhere, "slower" when it was slower
        everywhere it was served."""
        served = [(w, points) for w in self.manifest.workload if w.id != main.id
                  and 1 in w.concurrency and (points := self._draft_points(draft, w))]
        wins = {w.id for w in self._wins(draft)}  # the workloads its *Choose when* cell names come first
        for workload, points in sorted(served, key=lambda found: found[0].id not in wins):
            faster = next((p for p in points if p.speedup is not None and p.speedup > 1), None)
            if faster is not None:
                label = escape_markdown(workload.label or workload.id)
                return Markdown(f"{self.speed.tps(faster, in_table=True)}{ELSEWHERE_MARK}"), label
        if served and _slower([p for _, points in served for p in points]):
            return Markdown("slower than its target alone"), None
        return Markdown("not measured"), None

    def _choose_when(  # noqa: PLR0911
        self, other: Artifact, facts: dict[str, Facts], beaten: Artifact | None
    ) -> Markdown:
        """When to pick this artifact, from what was measured (a `choose_when` section overrides it)."""
        own = self.sections.get(other.id, {}).get("choose_when")
        if own:
            return prose(" ".join(own.split()))
        if not other.publish and not repo_exists(self.manifest, other):
            return Markdown("not published")
        if other.kind == "draft":
            return self._draft_when(other)
        # By the artifact's id, not its repo name: a repo name (Nanbeige4.2-3B-NVFP4-FP8-LoopShield) made the
        # table wider than the card's column.
        dominated = f"dominated by {escape_markdown(beaten.id)}" if beaten is not None else None
        if other.kind == "reference":
            return Markdown("the original weights")
        level = self._quality_level(other)
        if level == FAILS:
            return Markdown("avoid: fails a gate")
        if level is None:
            return Markdown("not judged against the reference yet")
        if dominated:
            return Markdown(dominated)
        # Best at what, among the artifacts that pass and are not dominated (the reference included: its
        # quality is what passing means); "fastest" and "smallest" by the same noise rule as domination.
        peers = [f for f in facts.values() if f.quality is not None and f.quality >= PASSES and f.published
                 and self.dominator(self.manifest.artifact_by_id(f.artifact_id), facts) is None]
        said = best_of(facts[other.id], peers, self.measured.noise) if other.id in facts else []
        if said:
            return Markdown(f"{' and '.join(said)} that passes")
        return Markdown("passes, smaller weights" if other.kind == "quant" else "passes every gate")

    def _wins(self, draft: Artifact) -> list[Workload]:
        """The workloads where `draft` is a clear win on its target: its config is the fastest there, beyond
        noise (`BestVerdict.clear`; the Speed section says "not a clear win" of the others)."""
        assert draft.draft is not None
        target = draft.draft.target
        return [w for w in self.manifest.workload if (v := self.speed.verdict(target, w.id)) is not None
                and v.clear and v.point.entry.record.draft_artifact_id == draft.id]

    def _draft_when(self, other: Artifact) -> Markdown:
        assert other.draft is not None
        gates = self.drafts.draft_gates(other)
        if gates is not None and gates["measured"] and not gates["passed"]:
            return Markdown("avoid: draft gates fail")
        target = other.draft.target
        measured = [(w, v) for w in self.manifest.workload if (v := self.speed.verdict(target, w.id)) is not None]
        won = [escape_markdown(w.label or w.id) for w in self._wins(other)]
        unclear = [w for w, v in measured if not v.clear and v.point.entry.record.draft_artifact_id == other.id]
        # Several labels spelled out made the demo's table wider than the Hub's column (two of its workloads:
        # 103 characters, three: 104); the draft's headline and speed tables name them. Counts in words: a
        # digit in a measured block must trace to a record (the card lint), and a count is not a measurement.
        if len(won) > 1 and len(won) == len(measured):
            return Markdown("every workload measured")
        if len(won) > 1:
            return Markdown(f"{count_words(len(won))} of {count_words(len(measured))} workloads")
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
        size = self.measured.sizes.get(artifact.id)
        found = self._memory_figures(artifact)
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

    def _memory_figures(self, artifact: Artifact) -> MemoryFigures | None:
        entries = [r.entry for (aid, _), r in self.measured.gates.items() if aid == artifact.id]
        entries += [p.entry for p in self.measured.points(artifact_id=artifact.id)]
        size = self.measured.sizes.get(artifact.id)
        return memory_figures(entries, weight_bytes=size[0] if size else None)


def _slower(points: list[SpeedPoint]) -> bool:
    """Every point measured slower with the draft than its target alone."""
    return all(p.speedup is not None and p.speedup <= 1 for p in points)


def count_words(n: int) -> str:
    """A small count in words (the choice table's counts of workloads)."""
    words = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
    return words[n] if n < len(words) else "many"
