"""Before anything is uploaded: the family's recorded gate results, judged by the release job's own rule.

`hfrelease release` stops before publishing when a gate of a published artifact does not pass
(`hfrelease.publish.decision.decide_gates`); a plain `hfrelease publish` must not be the way around that.
It judges the same ledger with the same function and refuses every artifact whose *recorded* result
the decision calls failed (or void: a draft's speed records). A gate with no usable record for the
current inputs (never evaluated here, evaluated on other weights, or only a void run, which the ledger
does not offer as a result) or none for the reference to compare with is not a recorded failure: it is
counted and said, and stays the release job's to stop on. `--allow-failed-gates` publishes all the
same, and the release commit of each such repo names the gates it failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from hfrelease.files.hashing import HashCache
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest
from hfrelease.publish.decision import GateProblem, decide_gates, eval_matrix
from hfrelease.verdicts import severity


@dataclass(frozen=True, kw_only=True)
class GateCheck:
    """The recorded gate problems of the artifacts being published."""

    failed: tuple[GateProblem, ...]  # recorded and not passing: publishing them needs `allow_failed_gates`
    unjudged: tuple[GateProblem, ...]  # no result (or no reference result) for the current inputs

    def by_artifact(self) -> dict[str, tuple[str, ...]]:
        """Each artifact's failed gates, as the lines its release commit carries."""
        found: dict[str, list[str]] = {}
        for problem in self.failed:
            found.setdefault(problem.artifact, []).append(problem.text)
        return {artifact: tuple(lines) for artifact, lines in found.items()}


def check_gates(
    manifest: Manifest,
    *,
    artifacts: Sequence[str],
    hash_cache: HashCache | None,
    allow_failed: bool,
    ledger: Ledger | None = None,
) -> GateCheck:
    """Judge the recorded gates of the published `artifacts` (all when empty); raise unless they pass or are allowed.

    The error is the release decision's own (`GateDecision.error`): exit 4 when a gate failed, 6 when a
    result was void, every problem named.
    """
    ledger = ledger or Ledger(manifest.ledger_dir)
    published = [a.id for a in manifest.artifact if a.publish and (not artifacts or a.id in artifacts)]
    # An empty matrix would make `decide_gates` plan every artifact: nothing of these is gated, nothing to judge.
    if not published or not eval_matrix(manifest, published) or not any(ledger.root.glob("*/*.json")):
        return GateCheck(failed=(), unjudged=())
    decision = decide_gates(manifest, ledger=ledger, hash_cache=hash_cache, artifacts=published)
    # Only a result recorded and not passing (`severity.recorded_failure`): "missing" and "no-reference" are a
    # result not there to judge, which `publish` cannot tell from a family not evaluated on this machine.
    failed = tuple(p for p in decision.blocking if severity.recorded_failure(p.kind))
    check = GateCheck(failed=failed, unjudged=tuple(p for p in decision.blocking if p not in failed))
    # The release decision's own error decides the class (exit 4 for a failed gate, 6 for a void result).
    error = replace(decision, blocking=failed).error()
    if error is not None and not allow_failed:
        lines = "\n".join(f"  - {p.text}" for p in failed)
        raise type(error)(
            f"publish refused: {len(failed)} recorded gate result(s) of published artifacts did not pass:\n{lines}",
            hint="Nothing was uploaded. Fix the artifact and evaluate it again (`hfrelease eval`), or publish it "
                 "anyway with `hfrelease publish --allow-failed-gates`: its release commit then names the failed "
                 "gates.")
    return check
