"""The speed tables of a card: batch-1 configs per workload, the load sweeps over concurrency, the
context-length sweeps, each tok/s with the spread of its repeats and each speedup with its range.

Every figure comes from `vllm bench serve` records (`hfrelease.speed`) as measured; nothing here
measures. Each number is registered as it is formatted, with the records it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence

from hfrelease.cards.measurements import EMULATED, NONE, BestVerdict, SpeedPoint
from hfrelease.cards.numbers import DASH, TIMES, fixed
from hfrelease.cards.text import Markdown, code_span, escape_markdown
from hfrelease.cards.view import CardView, Context
from hfrelease.manifest import Artifact, Workload
from hfrelease.speed.records import short_outputs

# A table's tok/s whose outputs ended far before output_len (`hfrelease.speed.records.short_outputs`): the
# templates explain the mark under the table (partials/short_outputs.md.j2).
SHORT_MARK = "\u2020"


class SpeedTables:
    """The speed figures of a card; each number is registered as it is formatted."""

    def __init__(self, view: CardView) -> None:
        self.view = view
        self.manifest = view.manifest
        self.measured = view.measured
        self.numbers = view.numbers

    def best(self, artifact_id: str, workload_id: str) -> SpeedPoint | None:
        """The fastest batch-1 config of `artifact_id` on a workload among every config measured on it
        (none, ngram, each draft), or None when no point without speculation was measured to compare with:
        a config is never called best without knowing it beats serving without speculation."""
        best = self.measured.best_batch1(artifact_id, workload_id)
        if best is None or (best.speculative != NONE and best.baseline is None):
            return None
        return best

    def verdict(self, artifact_id: str, workload_id: str) -> BestVerdict | None:
        """`best`'s point with the one verdict every card shows on it: a clear win, or not and where it loses."""
        if self.best(artifact_id, workload_id) is None:
            return None
        return self.measured.best_verdict(artifact_id, workload_id)

    def not_clear(self, verdict: BestVerdict) -> Markdown:
        """Why a fastest config is not a clear win: "slower than `none` at input 128, 256 and 512 tokens",
        "its batch-1 repeats overlap `draft`'s" (every point named is registered: headlines are measured blocks)."""
        parts: list[str] = []
        by_faster: dict[str, list[SpeedPoint]] = {}
        for loss in verdict.losses:
            by_faster.setdefault(loss.faster, []).append(loss.mine)
        for faster, mine in by_faster.items():
            places: list[str] = []
            inputs = [self.numbers.add(f"{self.point_id(p)}.input_len", f"input tokens, {self._point_label(p)}",
                                       str(p.input_len), [p.entry]) for p in mine if p.input_len]
            concurrencies = [self.numbers.add(f"{self.point_id(p)}.concurrency", f"concurrency, {self._point_label(p)}",
                                              str(p.concurrency), [p.entry]) for p in mine if not p.input_len]
            if concurrencies:
                places.append(f"concurrency {_and(concurrencies)}")
            if inputs:
                places.append(f"input {_and(inputs)} tokens")
            parts.append(f"slower than {code_span(faster)} at {' and at '.join(places)}")
        if verdict.overlaps:
            parts.append(f"its batch-1 repeats overlap {code_span(verdict.overlaps)}'s")
        if verdict.session is not None:  # README "How speed verdicts decide"
            kind, other = verdict.session
            parts.append(f"its batch-1 lead over {code_span(other)} is within session noise" if kind == "within" else
                         f"its batch-1 lead over {code_span(other)} is not shown beyond session noise (none "
                         "measured on this host)")
        return Markdown("not a clear win: " + "; ".join(parts))

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
        """`p`'s output tok/s over the reference's point `ref` with its 95 % interval between server sessions
        when the host's session noise was measured, "0.83x (0.62-1.11 between sessions: within session
        noise)"; otherwise with its repeats' range: the slowest repeat over the reference's fastest to the
        fastest over its slowest, "1.60x (1.52-1.66 over repeats)" (`spread=False`: the ratio alone, for the
        narrow family table, whose tok/s cell carries the repeats' range)."""
        base = f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}.vs_reference"
        label = (f"output tok/s of {p.artifact_id} ({p.speculative}) over the reference without speculation, "
                 f"{p.workload.id}" + (f", concurrency {p.concurrency}" if p.concurrency != 1 else ""))
        value = self.numbers.add(base, label, fixed(p.throughput / ref.throughput, 2), [p.entry, ref.entry])
        mine, theirs = self._spread(p, "output_throughput"), self._spread(ref, "output_throughput")
        if not spread:
            return Markdown(f"{value}{TIMES}")
        noise = self.measured.noise
        if noise is not None and p.throughput > 0 and ref.throughput > 0:
            # README "How speed verdicts decide": one session each side, the host's pooled session noise.
            interval = noise.ratio_interval(ref.throughput, p.throughput)
            low, high = (self.numbers.add(f"{base}.sessions95.{side}", f"{label}, 95 % interval between server "
                                          f"sessions, {side} bound", fixed(bound, 2), [p.entry, ref.entry])
                         for side, bound in zip(("low", "high"), interval, strict=True))
            within = ": within session noise" if interval[0] <= 1 <= interval[1] else ""
            # No bare "95 %" in a measured block: the card lint traces every number there to a record.
            return Markdown(f"{value}{TIMES} ({low}{DASH}{high} between sessions{within})")
        if (single := self.n_one(p, ref)) is not None:
            return Markdown(f"{value}{TIMES} ({single})")
        if mine is None or theirs is None or theirs[0] <= 0:
            return Markdown(f"{value}{TIMES}")
        low = self.numbers.add(f"{base}.min", f"{label}, lowest (slowest repeat / the reference's fastest)",
                               fixed(mine[0] / theirs[1], 2), [p.entry, ref.entry])
        high = self.numbers.add(f"{base}.max", f"{label}, highest (fastest repeat / the reference's slowest)",
                                fixed(mine[1] / theirs[0], 2), [p.entry, ref.entry])
        return Markdown(f"{value}{TIMES} ({low}{DASH}{high} over repeats)")

    def decode_vs_reference(self, p: SpeedPoint, ref: SpeedPoint) -> Markdown | None:
        """`p`'s decode speed over the reference's point `ref`, from the time per output token (TPOT, the
        request's duration after its first token): the reference's TPOT over `p`'s, with the range their
        repeats allow, or None when either lacks TPOT or a repeat's output came bunched (a TPOT near zero)."""
        tpots = [self._tpot(q) for q in (p, ref)]
        if tpots[0] is None or tpots[1] is None:
            return None
        (mine, mine_range), (theirs, theirs_range) = tpots[0], tpots[1]
        base = f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}.decode_vs_reference"
        label = (f"decode speed (reference's TPOT over this one's) of {p.artifact_id} ({p.speculative}) over the "
                 f"reference without speculation, {p.workload.id}")
        value = self.numbers.add(base, label, fixed(theirs / mine, 2), [p.entry, ref.entry])
        if (single := self.n_one(p, ref)) is not None:
            return Markdown(f"{value}{TIMES} ({single})")
        if mine_range is None or theirs_range is None:
            return Markdown(f"{value}{TIMES}")
        low = self.numbers.add(f"{base}.min", f"{label}, lowest (the reference's fastest TPOT repeat over this "
                               "one's slowest)", fixed(theirs_range[0] / mine_range[1], 2), [p.entry, ref.entry])
        high = self.numbers.add(f"{base}.max", f"{label}, highest (the reference's slowest TPOT repeat over this "
                                "one's fastest)", fixed(theirs_range[1] / mine_range[0], 2), [p.entry, ref.entry])
        return Markdown(f"{value}{TIMES} ({low}{DASH}{high})")

    def _tpot(self, p: SpeedPoint) -> tuple[float, tuple[float, float] | None] | None:
        """The median TPOT of `p` and its repeats' range, or None when absent or bunched: a repeat whose TPOT is
        below a tenth of the time per output token its throughput gives measured chunked delivery, not decode."""
        tpot = p.metrics.get("tpot_median_ms")
        if tpot is None or p.throughput <= 0:
            return None
        spread = self._spread(p, "tpot_median_ms")
        if min(tpot, *(spread or (tpot,))) < 0.1 * 1000.0 * p.concurrency / p.throughput:
            return None
        return tpot, spread

    def point_id(self, p: SpeedPoint) -> str:
        sweep = f".in{p.input_len}" if p.input_len else ""
        return f"speed.{p.workload.id}.{p.artifact_id}.{p.speculative}.c{p.concurrency}{sweep}"

    def _point_label(self, p: SpeedPoint) -> str:
        sweep = f", input {p.input_len} tokens" if p.input_len else ""
        return f"{p.workload.id} on {p.artifact_id}, {p.speculative}, concurrency {p.concurrency}{sweep}"

    def metric(self, p: SpeedPoint, name: str, places: int, label: str) -> Markdown | None:
        if name not in p.metrics:
            return None
        return self.numbers.add(f"{self.point_id(p)}.{name}", f"{label}, {self._point_label(p)}",
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

    def spread(self, p: SpeedPoint, name: str) -> tuple[float, float] | None:
        """The slowest and fastest repeat of a metric, as recorded (None without a recorded spread)."""
        return self._spread(p, name)

    def _spread(self, p: SpeedPoint, name: str) -> tuple[float, float] | None:
        spread = p.entry.record.extra.get("spread")
        pair = spread.get(name) if isinstance(spread, dict) else None
        values = [float(v) for v in pair if isinstance(v, int | float) and not isinstance(v, bool)] if isinstance(
            pair, list) else []
        return (values[0], values[1]) if len(values) == 2 else None

    def _repeats(self, p: SpeedPoint) -> int | None:
        repeats = p.entry.record.extra.get("repeats")
        return repeats if isinstance(repeats, int) and not isinstance(repeats, bool) else None

    def tps(self, p: SpeedPoint, *, in_table: bool = False, unit: str | None = None) -> Markdown:
        """Output tok/s, the median over repeats with the range of the repeats: "790.2 (658.8-796.8)"; labelled
        "emulated" when an emulation kernel served it, and when the outputs ended far before output_len, where
        the figure is mostly time to first token. In a table the short-outputs label is the mark `SHORT_MARK`,
        explained under the table: said in the cell, it made the table wider than the card's column. In prose,
        `unit` ("batch-1 output tok/s on Short chat") follows the figure and the labels follow in brackets: put
        between the figure and its unit, they broke the sentence ("47.2 (44.5-50.3), emulated, short outputs:
        4.8 tokens per answer, mostly time to first token batch-1 output tok/s on Short chat")."""
        cell = self._tps(p)
        notes = [EMULATED] if p.emulated else []  # the scheme's numerics at none of its speed (serving.emulation)
        mean = p.entry.record.extra.get("mean_output_tokens")
        tokens = None
        if short_outputs(p.entry.record) is not None and isinstance(mean, int | float):
            # Registered in a table too, where the mark stands for it: the provenance list names it.
            tokens = self.numbers.add(f"{self.point_id(p)}.mean_output_tokens", "output tokens per request (mean), "
                                      f"{self._point_label(p)}", fixed(mean, 1), [p.entry])
        if in_table:
            text = ", ".join([str(cell), *notes])
            return Markdown(f"{text}{SHORT_MARK}" if tokens is not None else text)
        if tokens is not None:
            notes.append(f"short outputs: {tokens} tokens per answer, mostly time to first token")
        if unit is None:
            return Markdown(", ".join([str(cell), *notes]))
        return Markdown(f"{cell} {unit}" + (f" ({'; '.join(notes)})" if notes else ""))

    def _tps(self, p: SpeedPoint) -> Markdown:
        median = self.metric(p, "output_throughput", 1, "output tok/s (median of repeats)")
        assert median is not None
        spread = self._spread(p, "output_throughput")
        if self._repeats(p) == 1:
            return Markdown(f"{median} ({self.n_one(p)})")
        if spread is None:
            return Markdown(f"{median} (spread not recorded)")
        low = self.numbers.add(f"{self.point_id(p)}.output_throughput.min",
                               f"output tok/s, slowest repeat, {self._point_label(p)}", fixed(spread[0], 1), [p.entry])
        high = self.numbers.add(f"{self.point_id(p)}.output_throughput.max",
                                f"output tok/s, fastest repeat, {self._point_label(p)}", fixed(spread[1], 1),
                                [p.entry])
        return Markdown(f"{median} ({low}{DASH}{high})")

    def n_one(self, *points: SpeedPoint) -> Markdown | None:
        """"n = 1" for a figure one of whose points ran once, None when each ran several times: one repeat
        has no range, and "1.69x (1.69-1.69)" would print one as if it had."""
        single = next((p for p in points if self._repeats(p) == 1), None)
        if single is None:
            return None
        # The count is a number in a measured block too: the lint holds every such number to a record.
        runs = self.numbers.add(f"{self.point_id(single)}.repeats", f"repeats, {self._point_label(single)}", "1",
                                [single.entry])
        return Markdown(f"n = {runs}")

    def failed(self, p: SpeedPoint) -> Markdown:
        failed = p.entry.record.extra.get("failed")
        if isinstance(failed, bool) or not isinstance(failed, int):
            return Markdown("not recorded")
        return self.numbers.add(f"{self.point_id(p)}.failed", f"failed requests, {self._point_label(p)}",
                                str(failed), [p.entry])

    def speedup(self, p: SpeedPoint) -> Markdown | None:
        """Speedup over no speculation with its range: the slowest repeat over the fastest baseline repeat
        to the fastest over the slowest, "2.14x (1.71-2.22)" with the multiplication sign and an en dash."""
        if p.speedup is None or p.baseline is None:
            return None
        label = (f"speedup of {p.speculative} over none, {p.workload.id} on {p.artifact_id}, "
                 f"concurrency {p.concurrency}" + (f", input {p.input_len} tokens" if p.input_len else ""))
        value = self.numbers.add(f"{self.point_id(p)}.speedup", label, fixed(p.speedup, 2), p.records)
        if (single := self.n_one(p, p.baseline)) is not None:
            return Markdown(f"{value}{TIMES} ({single})")
        mine, base = self._spread(p, "output_throughput"), self._spread(p.baseline, "output_throughput")
        if mine is None or base is None or base[0] <= 0:
            return Markdown(f"{value}{TIMES}")
        low = self.numbers.add(f"{self.point_id(p)}.speedup.min", f"{label}, lowest (slowest repeat / fastest "
                               "baseline repeat)", fixed(mine[0] / base[1], 2), p.records)
        high = self.numbers.add(f"{self.point_id(p)}.speedup.max", f"{label}, highest (fastest repeat / slowest "
                                "baseline repeat)", fixed(mine[1] / base[0], 2), p.records)
        return Markdown(f"{value}{TIMES} ({low}{DASH}{high})")

    def _speed_row(self, p: SpeedPoint, verdict: BestVerdict | None) -> Context:
        best = verdict.point if verdict is not None else None
        return {"config": code_span(p.speculative), "artifact": escape_markdown(p.artifact_id),
                "tps": self.tps(p, in_table=True), "speedup": self.speedup(p),
                "itl": self.latency(p, "itl_median_ms", 2, "ITL median ms"),
                "ttft": self.latency(p, "ttft_median_ms", 1, "TTFT median ms"),
                "mal": self.metric(p, "spec_mean_acceptance_length", 2, "mean acceptance length"),
                "best": (None if best is None or p.entry.name != best.entry.name
                         else "best" if verdict is not None and verdict.clear else "not a clear win")}

    def speed(self, artifact: Artifact) -> Context:
        workloads = []
        served: set[str] = set()
        server = artifact.draft.target if artifact.draft is not None else artifact.id
        for workload in self.manifest.workload:
            points = [p for p in self.measured.points(artifact_id=server, workload_id=workload.id)
                      if p.concurrency == 1 and self.view.shown_point(p)]
            if artifact.kind == "draft" and not any(p.entry.record.draft_artifact_id == artifact.id for p in points):
                continue  # a workload this draft never served in says nothing about it
            if not points:
                continue
            verdict = self.verdict(server, workload.id)
            rows = [self._speed_row(p, verdict) for p in points]
            served.update(p.artifact_id for p in points)
            workloads.append({
                "label": escape_markdown(workload.label or workload.id), "id": escape_markdown(workload.id),
                "output_len": workload.output_len, "thinking": workload.thinking, "ignore_eos": workload.ignore_eos,
                "rows": rows, "best": code_span(verdict.point.speculative) if verdict else None,
                "clear_win": verdict is None or verdict.clear,
                "not_clear": self.not_clear(verdict) if verdict is not None and not verdict.clear else None,
                "bunched": any(r["itl"] == "n/a (bunched)" for r in rows),
            })
        # A draft's rows name the artifact serving each only when they are several (its draft x target matrix): on
        # one target the column repeats the intro's "measured on", and it can push the table past the card's width.
        return {"measured": bool(workloads), "workloads": workloads,
                "by_artifact": artifact.kind == "draft" and len(served) > 1, "server": escape_markdown(server)}

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
                rows = [{"concurrency": Markdown(str(p.concurrency)), "tps": self.tps(p, in_table=True),
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
                           else p.artifact_id == artifact.id) and self.view.shown_point(p)]
            by_config: dict[tuple[str, str], list[SpeedPoint]] = {}
            for p in points:
                by_config.setdefault((p.artifact_id, p.speculative), []).append(p)
            # No speculation first, the baseline the others' speedups are over.
            for (artifact_id, spec), series in sorted(by_config.items(), key=lambda kv: (kv[0][0], kv[0][1] != NONE,
                                                                                       kv[0][1])):
                rows = [{"input_len": Markdown(str(p.input_len)), "tps": self.tps(p, in_table=True),
                         "ttft": self.latency(p, "ttft_median_ms", 1, "TTFT median ms"),
                         "tpot": self.latency(p, "tpot_median_ms", 2, "TPOT median ms"),
                         "acceptance": self.metric(p, "spec_acceptance_rate", 2, "acceptance rate"),
                         "speedup": self.speedup(p)}
                        for p in sorted(series, key=lambda p: p.input_len or 0)]
                tables.append({"workload": escape_markdown(workload.label or workload.id), "config": code_span(spec),
                               "artifact": escape_markdown(artifact_id), "rows": rows, "speculates": spec != NONE,
                               "output_len": workload.output_len, "sampling": escape_markdown(sampling(workload))})
        return {"measured": bool(tables), "tables": tables}

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


def _and(items: Sequence[str]) -> str:
    """"128", "128 and 256", "128, 256 and 512"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _bunched(p: SpeedPoint, name: str) -> bool:
    """Whether the latency `name` of `p` measures tokens delivered in one chunk, not decode (`latency`)."""
    tpot = p.metrics.get("tpot_median_ms")
    spread = p.entry.record.extra.get("spread")
    pair = spread.get(name) if isinstance(spread, dict) else None
    lowest = min([p.metrics[name]] + ([float(v) for v in pair if isinstance(v, int | float)]
                                      if isinstance(pair, list) else []))
    # Below 0.005 ms it would print as 0.00 whatever TPOT says (the lint refuses a 0.00 ITL): never a number.
    return lowest < 0.005 or (tpot is not None and tpot > 0 and lowest < 0.1 * tpot)


def _count(value: float) -> str:
    """A token count as the seeds write it: 354k, 1.2M, or the number itself below 10,000."""
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    return f"{value:.0f}"


def sampling(workload: Workload) -> str:
    """How a workload samples, as its tables and provenance say it: "greedy" or "temperature 0.6, top-p 0.95"."""
    if not workload.temperature:
        return "greedy"
    return f"temperature {workload.temperature:g}" + (f", top-p {workload.top_p:g}" if workload.top_p else "")
