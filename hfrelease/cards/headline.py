"""A card's headline: the few lines at its top that say what the artifact is worth, each with its
interval or range (weights, each gate's delta and recovery, the fastest batch-1 config per workload,
output throughput over the reference's)."""

from __future__ import annotations

from hfrelease.cards.fidelity import accuracy_gates
from hfrelease.cards.measurements import NONE
from hfrelease.cards.summary import Summary
from hfrelease.cards.text import Markdown, code_span, escape_markdown
from hfrelease.manifest import Artifact


class Headline(Summary):
    """The headline lines of a card, from the figures of its sections (one registry)."""

    def lines(self, artifact: Artifact) -> list[Markdown]:
        lines: list[Markdown] = []
        size = self.view.size(artifact)
        reference = self.manifest.reference
        if size is not None:
            ref_size = self.view.size(reference) if artifact.kind not in {"reference", "draft"} else None
            lines.append(Markdown(f"Weights: {size}" + (f" (reference: {ref_size})" if ref_size else "")))
        if artifact.kind not in ("reference", "draft"):
            for gate in accuracy_gates(self.manifest):
                result = self.measured.gate(artifact.id, gate.id)
                if result is None:
                    continue
                delta = self.quality.delta(result, f" {self.quality.unit(gate)} vs the reference")
                label = escape_markdown(gate.label or gate.id)
                if delta is None:
                    verdict, reason = escape_markdown(result.verdict), escape_markdown(result.reason)
                    lines.append(Markdown(f"{label}: {verdict} ({reason})"))
                    continue
                recovery = self.quality.recovery(result)
                lines.append(Markdown(f"{label}: {delta}"
                                      + (f", recovery {recovery}" if recovery else "")
                                      + f": {self.quality.verdict(result)}"))
        if artifact.kind == "draft":
            return lines + self.drafts.headline(artifact)
        for workload in self.manifest.workload:
            judged = self.speed.verdict(artifact.id, workload.id)
            if judged is None:
                continue
            best = judged.point
            label = escape_markdown(workload.label or workload.id)
            unclear = "" if judged.clear else f"; {self.speed.not_clear(judged)}"
            if best.speculative == NONE:
                alone = all(p.speculative == NONE for p in self.measured.points(artifact_id=artifact.id,
                                                                                 workload_id=workload.id))
                why = "the only config measured" if alone else "no speculative config was faster"
                lines.append(Markdown(f"{label}: {self.speed.tps(best, unit='tok/s batch-1')} without speculation "
                                      f"({why}{unclear})"))
            else:
                lines.append(Markdown(f"{label}: {self.speed.tps(best, unit='tok/s batch-1')} with "
                                      f"{code_span(best.speculative)}, {self.speed.speedup(best)} over no speculation"
                                      f"{unclear}"))
        if artifact.kind != "reference":
            lines += self._throughput_vs_reference(artifact)
        return lines

    def _throughput_vs_reference(self, artifact: Artifact) -> list[Markdown]:
        """Per workload measured on both, this artifact's output throughput without speculation over the
        reference's, with the range its repeats allow. Output throughput counts the time to the first token
        too: it is not a decode speed (1000/TPOT), so the line never calls it "decode"."""
        lines = []
        for workload in self.manifest.workload:
            pair = self.speed.reference_pair(artifact.id, workload.id)
            if pair is None:
                continue
            mine, ref = pair
            ratio = self.speed.vs_reference(mine, ref)
            batch = "batch-1" if mine.concurrency == 1 else f"concurrency {mine.concurrency}"
            decode = self.speed.decode_vs_reference(mine, ref)
            figures = f"{self.speed.tps(mine, unit='tok/s')} against {self.speed.tps(ref, unit='tok/s')}"
            if decode:
                figures += f"; decode {decode}, from TPOT"
            lines.append(Markdown(f"{escape_markdown(workload.label or workload.id)}: output throughput {ratio} the "
                                  f"reference's without speculation, {batch}: {figures}"))
        return lines
