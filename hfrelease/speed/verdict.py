"""What the speed measurements decide: speedups, the best config per workload, and draft artifacts' gates.

Best config: per (artifact, workload), the config with the highest median batch-1 output tok/s (ties:
the config the workload lists first, as cards choose). It is a *clear* win only when (1) it beats the
runner-up beyond session noise -- the lower bound of the 95 % interval of ln(best / runner-up) is above 0
(`hfrelease.speed.noise`, measured from the ledger's A/A groups on the host; unmeasured, no win is clear) --
and its repeats do not overlap the runner-up's, and (2) it is slower than no other config at any other
measured point of the workload (each concurrency, each input length of its context sweep); where it
loses is recorded (`BestConfig.loses_at`), so the record and every card say "not a clear win" and where.

Draft gates (thresholds on `[artifact.draft]`): every batch-1 point served with the draft must have
its acceptance measured (the speculative counters of /metrics; a point without them fails, thresholds
or not: a draft whose acceptance was never measured is not released), reach `min_acceptance_rate`,
`min_acceptance_length` and `min_speedup` over no speculation on the same workload -- the speedup at every
measured point of it (batch 1, each concurrency, each context length), each beyond session noise when the
ledger measured it (the interval's lower bound), never on one favourable point -- and be served
with the artifact it was trained against (`target`): acceptance measured against another verifier
says little about the one the card names. The acceptance is the point's pooled rate; its reason quotes the
95 % interval over prompts when the point had a per-request pass. At temperature 0, `min_identical_outputs`
bounds the share of prompts whose output tokens equal no speculation's (losslessness, measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from hfrelease.manifest import Manifest
from hfrelease.speed.acceptance import IDENTICAL, RATE, difference_interval
from hfrelease.speed.noise import SessionNoise
from hfrelease.speed.result import SpeedRow

NONE = "none"


def with_speedups(rows: Sequence[SpeedRow]) -> list[SpeedRow]:
    """Rows with `speedup` set against the ok "none" row of the same artifact, workload and concurrency (and
    input length, for a context sweep's points)."""
    baselines = {(r.artifact_id, r.workload_id, r.concurrency, r.input_len): r for r in rows
                 if r.speculative == NONE and r.status == "ok"}
    result: list[SpeedRow] = []
    for row in rows:
        base = baselines.get((row.artifact_id, row.workload_id, row.concurrency, row.input_len))
        speedup = None
        if row.status == "ok" and base is not None and base.throughput > 0:
            speedup = round(row.throughput / base.throughput, 4)
        result.append(replace(row, speedup=speedup))
    return result


@dataclass(frozen=True, kw_only=True)
class BestConfig:
    artifact_id: str
    workload_id: str
    speculative: str
    throughput: float
    speedup: float | None
    clear: bool  # a win beyond session noise over the runner-up, and slower nowhere else (module docstring)
    runner_up: str | None
    # Why it is not a clear win at batch 1 (None when it is): session noise unmeasured, within it, or overlapping.
    not_clear: str | None = None
    # Each other measured point of the workload where another config is faster: "input 128 tokens: none 75.6
    # tok/s, draft 37.8" (`where_it_loses`).
    loses_at: tuple[str, ...] = ()
    noise: SessionNoise | None = None  # the session noise it was judged against

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "loses_at": list(self.loses_at), "noise": self.noise.as_dict() if self.noise else None}


def _overlaps(a: SpeedRow, b: SpeedRow) -> bool:
    sa = a.spread.get("output_throughput") or [a.throughput, a.throughput]
    sb = b.spread.get("output_throughput") or [b.throughput, b.throughput]
    return sa[0] <= sb[1] and sb[0] <= sa[1]


def point_label(row: SpeedRow) -> str:
    """Which point of its workload a row is, as a reader names it."""
    if row.input_len is not None:
        return f"input {row.input_len} tokens"
    return f"concurrency {row.concurrency}"


def where_it_loses(config: str, artifact_id: str, workload_id: str, rows: Sequence[SpeedRow]) -> tuple[str, ...]:
    """Each point of the workload other than batch 1 (each concurrency, each context length) where another config
    is faster than `config` (both measured there, ok), the faster one named with both figures."""
    points: dict[str, list[SpeedRow]] = {}
    for row in rows:
        if (row.artifact_id, row.workload_id, row.status) == (artifact_id, workload_id, "ok") and (
                row.concurrency != 1 or row.input_len is not None):
            points.setdefault(point_label(row), []).append(row)
    found: list[str] = []
    for label, here in sorted(points.items(), key=lambda item: (item[1][0].input_len or 0, item[1][0].concurrency)):
        mine = next((r for r in here if r.speculative == config), None)
        faster = max((r for r in here if r is not mine), key=lambda r: r.throughput, default=None)
        if mine is not None and faster is not None and faster.throughput > mine.throughput:
            found.append(f"{label}: {faster.speculative} {faster.throughput:.1f} tok/s, {config} {mine.throughput:.1f}")
    return tuple(found)


def _not_clear(top: SpeedRow, runner_up: SpeedRow | None, noise: SessionNoise | None) -> str | None:
    """Why `top` is not a clear batch-1 win over `runner_up`, or None when it is."""
    if runner_up is None:
        return None
    if noise is None:
        return (f"session noise unmeasured: no point of this host recorded in two sessions, so its lead over "
                f"{runner_up.speculative} is not shown to exceed it")
    low, _ = noise.ratio_interval(runner_up.throughput, top.throughput) if runner_up.throughput > 0 else (2.0, 2.0)
    if low <= 1:
        return (f"within session noise of {runner_up.speculative}: {top.throughput / runner_up.throughput:.2f}x, "
                f"95 % {low:.2f}x or less (between sessions, df {noise.df})")
    if _overlaps(top, runner_up):
        return f"its batch-1 repeats overlap {runner_up.speculative}'s"
    return None


def best_configs(manifest: Manifest, rows: Sequence[SpeedRow], noise: SessionNoise | None = None) -> list[BestConfig]:
    """The best batch-1 config of every (artifact, workload) with at least one ok batch-1 point, judged against
    `noise` (the host's session noise, `hfrelease.speed.noise.host_noise`) and the workload's other points; an
    artifact served by an emulation kernel has none."""
    order = {w.id: list(w.speculative) for w in manifest.workload}
    groups: dict[tuple[str, str], list[SpeedRow]] = {}
    for row in rows:
        if row.emulated:
            continue  # an emulation kernel's speed is not the scheme's (hfrelease.serving.emulation)
        if row.concurrency == 1 and row.status == "ok" and row.input_len is None:  # a sweep's points: not the workload
            groups.setdefault((row.artifact_id, row.workload_id), []).append(row)
    best: list[BestConfig] = []
    for (artifact_id, workload_id), candidates in groups.items():
        listed = order.get(workload_id, [])
        ranked = sorted(candidates, key=lambda r: (-r.throughput, listed.index(r.speculative)
                                                   if r.speculative in listed else len(listed)))
        top = ranked[0]
        runner_up = ranked[1] if len(ranked) > 1 else None
        why = _not_clear(top, runner_up, noise)
        losses = where_it_loses(top.speculative, artifact_id, workload_id, rows)
        best.append(BestConfig(
            artifact_id=artifact_id, workload_id=workload_id, speculative=top.speculative,
            throughput=top.throughput, speedup=top.speedup, clear=why is None and not losses,
            runner_up=runner_up.speculative if runner_up else None, not_clear=why, loses_at=losses, noise=noise,
        ))
    return best


@dataclass(frozen=True, kw_only=True)
class DraftCheck:
    draft_id: str
    # "acceptance-vs-reference": the gate of a head the artifact ships itself (`own_head_checks`); `draft_id`
    # is then that artifact.
    check: Literal["acceptance", "acceptance-length", "speedup", "target", "identical-outputs",
                   "acceptance-vs-reference"]
    artifact_id: str
    workload_id: str
    speculative: str
    value: float | None
    threshold: float | None
    verdict: Literal["pass", "fail"]
    reason: str
    # What the verdict compared with `threshold` when it is not `value`: the lower bound of a 95 % interval
    # resampled over `judged_over` ("prompts" for acceptance, "sessions" for speedup), at `judged_at` (the point
    # where it is lowest, for a gate judged at every point of a workload).
    judged: float | None = None
    judged_over: Literal["prompts", "sessions"] | None = None
    judged_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def draft_checks(manifest: Manifest, rows: Sequence[SpeedRow], noise: SessionNoise | None = None) -> list[DraftCheck]:
    """The draft gates of every draft artifact that served in `rows` (batch-1, ok points; the speedup over every
    point of the workload, against the host's session `noise`)."""
    checks: list[DraftCheck] = []
    for row in rows:
        if row.draft_id is None or row.concurrency != 1 or row.status != "ok" or row.input_len is not None:
            continue
        draft = manifest.artifact_by_id(row.draft_id)
        if draft.draft is None:
            continue
        spec = draft.draft
        if spec.matrix and row.artifact_id != spec.target:
            continue  # a draft x target matrix point: reported on the draft's card, not a gate of the draft
        base: dict[str, Any] = {"draft_id": draft.id, "artifact_id": row.artifact_id,
                                "workload_id": row.workload_id, "speculative": row.speculative}
        on_target = row.artifact_id == spec.target
        checks.append(DraftCheck(
            **base, check="target", value=None, threshold=None, verdict="pass" if on_target else "fail",
            reason=f"served with its target {spec.target}" if on_target else
            f"trained against {spec.target} but served with {row.artifact_id}: measure it with its target",
        ))
        rate = row.acceptance
        if spec.min_acceptance_rate is not None:
            checks.append(acceptance_check(base, row, spec.min_acceptance_rate))
        else:
            # No floor, but the acceptance must still be measured: it is what the card reports.
            checks.append(DraftCheck(
                **base, check="acceptance", value=rate, threshold=None, verdict="pass" if rate is not None else "fail",
                reason=("no acceptance counters were recorded" if rate is None else
                        f"acceptance {rate:.3f}{over_prompts(row)} measured (no minimum set)"),
            ))
        if spec.min_acceptance_length is not None:
            length = row.metrics.get("spec_mean_acceptance_length")
            ok = length is not None and length >= spec.min_acceptance_length
            checks.append(DraftCheck(
                **base, check="acceptance-length", value=length, threshold=spec.min_acceptance_length,
                verdict="pass" if ok else "fail",
                reason=("no acceptance counters were recorded" if length is None else
                        f"mean acceptance length {length:.2f} {'>=' if ok else '<'} {spec.min_acceptance_length:g}"),
            ))
        if spec.min_identical_outputs is not None and row.greedy:
            checks.append(identical_outputs_check(base, row, spec.min_identical_outputs))
        if spec.min_speedup is not None:
            checks.append(speedup_check(base, row, rows, spec.min_speedup, noise))
    return checks


def own_head_checks(manifest: Manifest, rows: Sequence[SpeedRow], *, reference_measured: bool = True
                    ) -> list[DraftCheck]:
    """The gate of every config with `min_acceptance_vs_reference` (a head the served artifact ships itself, as
    native MTP's layers): at batch 1 on each workload, every artifact other than the reference must accept at
    least that share of what the reference accepts there. Where both points keep per-request counters over the
    same prompts, the difference (its rate - share x the reference's) is resampled over prompts in pairs and its
    95 % lower bound must be >= 0, so both points' variation counts (`_paired_share_check`); otherwise the lower
    bound of its own interval over prompts against the share of the reference's pooled rate (a point without a
    per-request record is judged on its value, which the reason says). The reference's own point must be
    measured, or there is nothing to compare with and the gate fails -- unless `reference_measured` is False:
    one artifact's eval job, which does not serve the reference, leaves the gate to the merge job
    (`hfrelease.speed.drafts.judge_own_heads`)."""
    shares = {s.id: s.min_acceptance_vs_reference for s in manifest.speculative
              if s.min_acceptance_vs_reference is not None}
    points = [r for r in rows if r.speculative in shares and r.concurrency == 1 and r.input_len is None
              and r.status == "ok"]
    reference = manifest.reference.id
    theirs = {(r.workload_id, r.speculative): r for r in points if r.artifact_id == reference}
    checks: list[DraftCheck] = []
    for row in points:
        if row.artifact_id == reference:
            continue
        share = shares[row.speculative]
        assert share is not None
        base: dict[str, Any] = {"draft_id": row.artifact_id, "artifact_id": row.artifact_id,
                                "workload_id": row.workload_id, "speculative": row.speculative}
        ref = theirs.get((row.workload_id, row.speculative))
        if ref is None and not reference_measured:
            continue
        if ref is None or ref.acceptance is None:
            checks.append(DraftCheck(
                **base, check="acceptance-vs-reference", value=row.acceptance, threshold=None, verdict="fail",
                reason=f"the reference {reference}'s acceptance with {row.speculative} on {row.workload_id} was not "
                       "measured: nothing to compare with (measure the reference on this workload too)"))
            continue
        floor = share * ref.acceptance
        # Paired only over the same prompts (same file, as many requests); otherwise the unpaired rule below.
        same_prompts = (ref.prompts_sha256 is not None and ref.prompts_sha256 == row.prompts_sha256
                        and bool(row.requests) and len(ref.requests) == len(row.requests))
        paired = (difference_interval(ref.requests, row.requests, RATE, paired=True, scale=share)
                  if same_prompts else None)
        if paired is not None and row.acceptance is not None:
            checks.append(_paired_share_check(base, row, ref, share, paired))
            continue
        bound = f"{floor:.3f} ({share:g} x the reference's {ref.acceptance:.3f}{over_prompts(ref)})"
        checks.append(replace(acceptance_check(base, row, floor, bound=bound), check="acceptance-vs-reference"))
    return checks


def _paired_share_check(base: dict[str, Any], row: SpeedRow, ref: SpeedRow, share: float,
                        interval: tuple[float, float]) -> DraftCheck:
    """The own-head gate where both points keep per-request counters over the same prompts: it passes when the
    lower bound of the 95 % interval of (this artifact's rate - share x the reference's), the prompts resampled
    in pairs, is at least 0, so the reference's own variation over prompts is judged too, not only quoted.
    `judged` is the floor plus that lower bound (>= the floor exactly when the gate passes)."""
    assert row.acceptance is not None and ref.acceptance is not None
    floor = share * ref.acceptance
    low, high = interval
    ok = low >= 0
    reason = (f"acceptance {row.acceptance:.3f} against {share:g} x the reference's {ref.acceptance:.3f} = "
              f"{floor:.3f} on the same {len(row.requests)} prompts: the difference is {row.acceptance - floor:+.3f}, "
              f"95 % over prompts resampled in pairs {low:+.3f} to {high:+.3f}: its lower bound "
              f"{'>=' if ok else '<'} 0")
    return DraftCheck(**base, check="acceptance-vs-reference", value=row.acceptance, threshold=floor,
                      verdict="pass" if ok else "fail", reason=reason, judged=floor + low, judged_over="prompts")


def speedup_check(base: dict[str, Any], row: SpeedRow, rows: Sequence[SpeedRow], floor: float,
                  noise: SessionNoise | None) -> DraftCheck:
    """The speedup gate of a draft's batch-1 point `row`, judged at every measured point of its workload served
    the same way (batch 1, each concurrency, each context length, each beside its own point without
    speculation): it passes only when every one reaches `floor` -- beyond session noise when `noise` is
    measured (the lower bound of the interval of ln(speedup)), else on the point's value, which it says."""
    if row.speedup is None:
        return DraftCheck(**base, check="speedup", value=None, threshold=floor, verdict="fail",
                          reason=f"no batch-1 measurement without speculation on {row.workload_id} to compare with")
    same = (row.artifact_id, row.workload_id, row.speculative)
    others = [r for r in rows if r is not row and r.status == "ok" and r.speedup is not None
              and (r.artifact_id, r.workload_id, r.speculative) == same]
    points = [row, *sorted(others, key=lambda r: (r.input_len or 0, r.concurrency))]
    judged: list[tuple[str, float, bool]] = []
    lowest: tuple[float, str] | None = None
    for point in points:
        assert point.speedup is not None
        low = point.speedup
        if noise is not None:
            low = point.speedup * noise.ratio_interval(1.0, 1.0)[0]  # exp(-t s sqrt(2)): one session each side
        where = "batch-1 speedup" if point is row else point_label(point)
        bound = f" (95 % from {low:.2f}x, between sessions)" if noise is not None else ""
        ok = low >= floor
        judged.append((f"{where} {point.speedup:.2f}x{bound} {'>=' if ok else '<'} {floor:g}x", point.speedup, ok))
        if lowest is None or low < lowest[0]:
            lowest = (low, "batch 1" if point is row else point_label(point))
    assert lowest is not None
    failed = [text for text, _, ok in judged if not ok]
    unmeasured = "" if noise is not None else " (session noise unmeasured on this host: judged on the points' values)"
    return DraftCheck(
        **base, check="speedup", value=min(value for _, value, _ in judged), threshold=floor,
        verdict="fail" if failed else "pass", reason="; ".join(failed or [text for text, _, _ in judged]) + unmeasured,
        judged=lowest[0], judged_over="sessions" if noise is not None else None, judged_at=lowest[1])


def acceptance_check(base: dict[str, Any], row: SpeedRow, floor: float, *, bound: str | None = None) -> DraftCheck:
    """The acceptance gate of a batch-1 point: greedy repeats give identical counters, so what varies is the
    prompt; the gate passes when the lower bound of the rate's 95 % interval resampled over prompts reaches
    `floor` (as the speedup gate judges its interval's lower bound). A point without a per-request record
    (an older ledger) is judged on its value, which the reason says. `bound` says where `floor` came from (the
    reason's text for it; default: the floor itself)."""
    rate = row.acceptance
    if rate is None:
        return DraftCheck(**base, check="acceptance", value=None, threshold=floor, verdict="fail",
                          reason="no acceptance counters were recorded" + (f" (required: {bound})" if bound else ""))
    pair = row.acceptance_intervals.get(RATE)
    judged = pair[0] if pair else rate
    ok = judged >= floor
    sign = ">=" if ok else "<"
    bound = bound or f"{floor:g}"
    reason = (f"acceptance {rate:.3f}, 95 % over prompts {pair[0]:.3f}-{pair[1]:.3f}: its lower bound {sign} {bound}"
              if pair else f"acceptance {rate:.3f} {sign} {bound} (one value: no per-request record to resample "
              "prompts from)")
    return DraftCheck(**base, check="acceptance", value=rate, threshold=floor, verdict="pass" if ok else "fail",
                      reason=reason, judged=judged if pair else None, judged_over="prompts" if pair else None)


def over_prompts(row: SpeedRow) -> str:
    """" (95 % over prompts a-b)" when the row's acceptance has an interval resampled over prompts."""
    pair = row.acceptance_intervals.get(RATE)
    return f" (95 % over prompts {pair[0]:.3f}-{pair[1]:.3f})" if pair else ""


def identical_outputs_check(base: dict[str, Any], row: SpeedRow, bound: float) -> DraftCheck:
    """The losslessness gate: the share of the point's prompts whose output tokens equal no speculation's
    (measured at temperature 0 on the same vLLM build) must reach `bound`; unmeasured, it fails."""
    share = row.metrics.get(IDENTICAL)
    ok = share is not None and share >= bound
    return DraftCheck(
        **base, check="identical-outputs", value=share, threshold=bound, verdict="pass" if ok else "fail",
        reason=(f"outputs never compared with no speculation's at temperature 0 on {row.workload_id} (a batch-1 "
                "point of each, per-request pass, same vLLM version)" if share is None else
                f"{share:.0%} of prompts give no speculation's output tokens {'>=' if ok else '<'} {bound:.0%}"),
    )
