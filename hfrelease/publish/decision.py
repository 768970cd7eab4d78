"""The rules of a tagged release, shared by the GitHub Actions jobs and their local rehearsal.

- The tag pushed must be the manifest's release tag (`[publish].tag` filled with `family.version`),
  checked before any GPU time is spent.
- The eval matrix holds one job per artifact that has gates, and one per draft: a draft's job serves it
  with its target and judges its draft gates (`hfrelease.speed.drafts`); the job's command is the same.
- After the matrix's ledgers are merged, every gate is judged again on the merged ledger, and the release
  stops before publishing when a gate of a *published* artifact failed, was void, had no valid reference
  to compare with, or was not recorded at all; likewise when a published draft's draft gate failed or its
  acceptance was never measured. An artifact with `publish = false` (a regression fixture
  like the demo's under-trained variant, or a vendor's reference) may fail: its rows are reported, and it
  is never uploaded. The reference's own results still matter through the comparisons they anchor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hfrelease.errors import ConfigError, ConfigProblem, ExitCode, GateFailedError, HfreleaseError, MeasurementError
from hfrelease.evaluation.judging import GateRow, judge
from hfrelease.evaluation.plan import plan_eval
from hfrelease.files.hashing import HashCache
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest
from hfrelease.manifest.selection import select
from hfrelease.speed.verdict import DraftCheck
from hfrelease.verdicts import severity

# The jobs of `.github/workflows/release.yml`, in order; the rehearsal runs the same ones under the same names.
JOBS = ("check", "eval", "merge", "render", "bundle", "publish")


class TagMismatchError(ConfigError):
    """The pushed tag is not the release the manifest describes: nothing may be evaluated or published."""

    def __init__(self, manifest: Manifest, tag: str) -> None:
        expected = manifest.tag_name()
        super().__init__(
            "hfrelease release",
            [ConfigProblem(location="family.version", message=(
                f"the tag {tag!r} does not match this manifest's release tag {expected!r} "
                f"([publish].tag = {manifest.publish.tag!r}, family.version = {manifest.family.version!r})"))],
        )
        self.hint = (
            f"Set family.version in {manifest.root.name}/release.toml to the version being released and commit it, "
            f"then tag that commit; or delete the wrong tag (git push --delete origin {tag}) and push {expected!r}."
        )


def check_tag(manifest: Manifest, tag: str | None) -> str:
    """The release tag; raises `TagMismatchError` (exit 3) when `tag` is given and is not it."""
    expected = manifest.tag_name()
    if tag is not None and tag != expected:
        raise TagMismatchError(manifest, tag)
    return expected


@dataclass(frozen=True, kw_only=True)
class MatrixEntry:
    """One eval job of the matrix; `publish` tells the job whether a gate failure may pass (policy above)."""

    artifact: str
    publish: bool

    def as_dict(self) -> dict[str, str | bool]:
        return {"artifact": self.artifact, "publish": self.publish}


def eval_matrix(manifest: Manifest, artifacts: Sequence[str] = (), gates: Sequence[str] = ()) -> list[MatrixEntry]:
    """One entry per artifact that has a gate to run, and per draft (restricted to `artifacts` if given). A
    workload listing a config gated against the reference's acceptance (`min_acceptance_vs_reference`) gives
    each artifact it is measured on, the reference too, a gate: its job measures the points the merge judges.

    Restricting the matrix to some `gates` leaves the drafts and those out: their gates are not those.
    """
    from hfrelease.evaluation.plan import gate_artifacts
    from hfrelease.speed.drafts import own_head_manifest
    from hfrelease.speed.plan import workload_artifacts

    select(manifest, artifacts=artifacts, gates=gates)
    with_gates = {a for g in manifest.gate if not gates or g.id in gates for a in gate_artifacts(manifest, g)}
    if not gates:
        with_gates |= {a for w in own_head_manifest(manifest).workload for a in workload_artifacts(manifest, w)}
    return [MatrixEntry(artifact=a.id, publish=a.publish) for a in manifest.artifact
            if (a.id in with_gates or (a.kind == "draft" and not gates)) and (not artifacts or a.id in artifacts)]


def check_drafts_served(manifest: Manifest, entries: Sequence[MatrixEntry]) -> None:
    """Raise `ConfigError` (exit 3, in the check job: before any GPU time) when a draft of the matrix is
    served with its target by no workload: its job could not measure it, and the release would stop after it."""
    from hfrelease.speed.drafts import draft_manifest, unserved_problem

    drafts = [manifest.artifact_by_id(e.artifact) for e in entries]
    problems = [unserved_problem(manifest, d) for d in drafts
                if d.kind == "draft" and not draft_manifest(manifest, d.id).workload]
    if problems:
        raise ConfigError("hfrelease release", problems)


@dataclass(frozen=True, kw_only=True)
class GateProblem:
    """A gate of one artifact that did not pass: failed, void, without a reference, or not recorded."""

    artifact: str
    gate: str
    kind: str  # an outcome of `hfrelease.verdicts.severity`: a GateRow verdict, "missing", a draft kind
    text: str


@dataclass(frozen=True, kw_only=True)
class GateDecision:
    """The release gate over a merged ledger: every row, and the problems that stop the release."""

    rows: tuple[GateRow, ...]
    draft_checks: tuple[DraftCheck, ...] = ()  # every draft gate judged (the problems below name the failures)
    blocking: tuple[GateProblem, ...]  # of published artifacts: any one stops the release
    allowed: tuple[GateProblem, ...]  # of unpublished artifacts: reported; they are never uploaded

    def error(self) -> HfreleaseError | None:
        """What stops the release, or None: the most serious problem's code, as `eval` exits on the same
        verdicts (`hfrelease.verdicts.severity`): 6 when a result is void, has no reference or is missing, else 4."""
        if not self.blocking:
            return None
        lines = "\n".join(f"  - {p.text}" for p in self.blocking)
        message = (f"the release stops before publishing: {len(self.blocking)} gate problem(s) of published "
                   f"artifacts:\n{lines}")
        hint = ("Nothing was uploaded. Fix the artifact (or mark a fixture publish = false) and push the tag again; "
                "results already recorded for the same inputs are not re-measured.")
        if severity.exit_code(p.kind for p in self.blocking) == ExitCode.GATE_FAILED:
            return GateFailedError(message, hint=hint)
        return MeasurementError(message, hint=hint)


def decide_gates(
    manifest: Manifest,
    *,
    ledger: Ledger,
    hash_cache: HashCache | None,
    artifacts: Sequence[str] = (),
    gates: Sequence[str] = (),
) -> GateDecision:
    """Judge every gate of the matrix's artifacts on `ledger` (after the merge) under the release policy.

    Nothing is measured here: a gate with no record for the current inputs is a problem of its own (an
    eval job did not record it), never a reason to start a server on the merge job's machine.
    """
    from hfrelease.speed.drafts import judge_draft, judge_own_heads

    entries = eval_matrix(manifest, artifacts, gates)
    published = {e.artifact: e.publish for e in entries}
    drafts = [e.artifact for e in entries if manifest.artifact_by_id(e.artifact).kind == "draft"]
    # Nothing is downloaded and no harness need be installed here (a merge job on a GitHub-hosted runner
    # installs hfrelease alone): a Hub source is identified from the Hub's listing, and a record made on an
    # eval runner is found under the vLLM / lm-eval versions it names (`find_gate_record`).
    plan = plan_eval(manifest, ledger=ledger, hash_cache=hash_cache, artifacts=list(published), gates=gates,
                     download=False, any_harness=True)
    rows = judge(plan, ledger=ledger, measured={}, hash_cache=hash_cache, any_harness=True)
    problems = [
        GateProblem(artifact=job.artifact.id, gate=g.gate.id, kind="missing",
                    text=f"{job.artifact.id}: {g.gate.label or g.gate.id}"
                         + (f" (seed {g.gate.seed})" if g.seeded else "") + ": "
                         + (f"its content could not be identified ({job.unknown})" if job.unknown else
                            "no result recorded for the current inputs (its eval job failed or did not run)"))
        for job in plan.servers for g in job.pending
    ] + [
        GateProblem(artifact=r.artifact_id, gate=r.gate_id, kind=r.verdict,
                    text=f"{r.artifact_id}: {r.label}: {r.verdict} ({r.reason})")
        for r in rows if severity.blocks_publish(r.verdict)
    ]
    # A draft's gates are judged from its job's speed records (and the target's baseline beside them).
    judged = [judge_draft(manifest, d, ledger=ledger, hash_cache=hash_cache) for d in drafts]
    # A head an artifact ships itself (native MTP) is judged against the reference's acceptance, from both
    # artifacts' speed records (their eval jobs measured them; `hfrelease.speed.verdict.own_head_checks`).
    judged += judge_own_heads(manifest, [a for a in published if a not in drafts], ledger=ledger,
                              hash_cache=hash_cache)
    problems += [GateProblem(artifact=p.draft_id, gate=f"draft:{p.check}", kind=p.kind, text=p.text)
                 for j in judged for p in j.problems]
    return GateDecision(rows=tuple(rows), draft_checks=tuple(c for j in judged for c in j.checks),
                        blocking=tuple(p for p in problems if published[p.artifact]),
                        allowed=tuple(p for p in problems if not published[p.artifact]))
