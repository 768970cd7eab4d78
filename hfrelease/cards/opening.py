"""A card's opening: two sentences from the ledger in the shape of the hand-written seed cards (the
size against the base, the speed with its range, the worst quality delta with its interval, the
verdict), right above the choice table. The per-gate and per-workload lines follow lower down."""

from __future__ import annotations

from hfrelease.cards.choose_table import ChooseTable, count_words
from hfrelease.cards.measurements import NONE
from hfrelease.cards.text import Markdown, code_span, escape_markdown
from hfrelease.manifest import Artifact


class Opening(ChooseTable):
    """The two opening sentences of a card (one registry with the rest of it)."""

    def sentences(self, artifact: Artifact) -> Markdown | None:
        if artifact.kind == "draft":
            parts = [self._draft_speed(artifact), self._draft_verdict(artifact)]
        else:
            parts = [self._size_and_speed(artifact), self._quality_verdict(artifact)]
        said = [p for p in parts if p]
        return Markdown(" ".join(said)) if said else None

    def _size_and_speed(self, artifact: Artifact) -> Markdown | None:
        size = self.view.size(artifact)
        workload = self.main_workload()
        said = []
        if size is not None:
            ref_size = self.view.size(self.manifest.reference) if artifact.kind != "reference" else None
            said.append(f"{size} of weights" + (f" against the reference's {ref_size}" if ref_size else ""))
        if workload is not None:
            label = escape_markdown(workload.label or workload.id)
            pair = self.speed.reference_pair(artifact.id, workload.id) if artifact.kind != "reference" else None
            best = self.speed.best(artifact.id, workload.id)
            if pair is not None:
                mine, ref = pair
                said.append(f"{self.speed.tps(mine, unit=f'batch-1 output tok/s on {label}')}, "
                            f"{self.speed.vs_reference(mine, ref)} the reference's")
            elif best is not None:
                how = "without speculation" if best.speculative == NONE else f"with {code_span(best.speculative)}"
                said.append(f"{self.speed.tps(best, unit=f'batch-1 output tok/s on {label} {how}')}")
        if not said:
            return None
        return Markdown(_sentence("; ".join(said)))

    def _quality_verdict(self, artifact: Artifact) -> Markdown | None:
        beaten = self.dominator(artifact, self.facts(self.main_workload()))
        dominated = (f"; {escape_markdown(beaten.repo.split('/')[1])} is at least as good on every column of the "
                     "table below, so choose it instead") if beaten is not None else ""
        if artifact.kind == "reference":
            return Markdown(_sentence("Every other artifact of the family is gated against its quality" + dominated))
        results = self.quality.gate_results(artifact)
        compared = [r for r in results if r.comparison is not None]
        if not compared:
            return Markdown(_sentence("Its quality is not judged against the reference yet")) if results else None
        worst = min(compared, key=lambda r: r.comparison.ci_low if r.comparison else 0.0)
        label = escape_markdown(worst.gate.label or worst.gate.id)
        failed = [escape_markdown(r.gate.label or r.gate.id) for r in results if r.verdict == "fail"]
        if failed:
            verdict = (f"it fails {count_words(len(failed))} of {count_words(len(results))} quality gates "
                       f"({', '.join(failed)}): avoid it")
            dominated = ""  # an artifact to avoid is not one to swap for a better one
        elif len(compared) < len(results):
            verdict = "its other gates are void"
        else:
            verdict = "it passes every quality gate"
        delta = self.quality.delta(worst, " " + self.quality.unit(worst.gate))
        return Markdown(_sentence(f"Its worst quality delta is {delta} on {label}: "
                                  f"{verdict}{dominated}"))

    def _draft_speed(self, artifact: Artifact) -> Markdown | None:
        assert artifact.draft is not None
        target = self.manifest.artifact_by_id(artifact.draft.target)
        size = self.view.size(artifact)
        head = f"{size} of draft weights for {escape_markdown(target.repo.split('/')[1])}" if size else None
        # The pairing that gains most among those where it is a clear win (the Speed section's verdict) on
        # its target or a target of its matrix: a pairing slower than no speculation is never named here.
        targets = [target.id] + (list(artifact.draft.matrix) if isinstance(artifact.draft.matrix, list) else [])
        won = []
        for workload in self.manifest.workload:
            for target_id in targets:
                verdict = self.speed.verdict(target_id, workload.id)
                point = verdict.point if verdict is not None and verdict.clear else None
                if (point is not None and point.entry.record.draft_artifact_id == artifact.id
                        and (point.speedup or 0) > 1):
                    won.append((point.speedup or 0.0, workload, point))
        if not won:
            tail = "no workload measured is faster with it than without speculation"
        else:
            _, workload, point = max(won, key=lambda w: w[0])
            served = self.manifest.artifact_by_id(point.artifact_id)
            unit = f"batch-1 output tok/s on {escape_markdown(workload.label or workload.id)}"
            tail = (f"served with it, {escape_markdown(served.repo.split('/')[1])} makes "
                    f"{self.speed.tps(point, unit=unit)}, "
                    f"{self.speed.speedup(point)} over no speculation")
        return Markdown(_sentence(f"{head}; {tail}" if head else tail))

    def _draft_verdict(self, artifact: Artifact) -> Markdown:
        gates = self.drafts.draft_gates(artifact)
        said = str(self.drafts.outputs(artifact))
        if gates is not None and gates["measured"]:
            said += "; its draft gates pass" if gates["passed"] else "; its draft gates **fail**: avoid it"
        return Markdown(_sentence(said))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."

