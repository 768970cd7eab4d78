"""The release workflow's own steps (`hfrelease release --only check|gate|publish`), as stage functions.

`check_step` decides the eval matrix (the check job), `gate_step` judges the merged ledger (the merge
job), `publish_step` publishes and verifies (the publish job, with the same `publish_stage` and
`verify_stage` as `hfrelease publish` and `hfrelease verify`). On GitHub Actions each writes its job
output and step summary; the rehearsal (`hfrelease release`) runs them through the same CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hfrelease.errors import ConfigError, ConfigProblem, ExitCode, PublishError, UsageError
from hfrelease.files.cache import default_hash_cache

if TYPE_CHECKING:
    from hfrelease.ci.rehearsal import RehearsalReport
    from hfrelease.files.hashing import HashCache
    from hfrelease.manifest import Manifest
    from hfrelease.publish import PublishReport
    from hfrelease.publish.decision import GateDecision, MatrixEntry
    from hfrelease.publish.readback import VerifiedRepo
    from hfrelease.stages.view import Line

Step = Literal["check", "gate", "publish"]
STEPS: tuple[Step, ...] = ("check", "gate", "publish")
_HELP = "`hfrelease release --help` says which options go together."


@dataclass(frozen=True, kw_only=True)
class ReleaseSettings:
    """`hfrelease release`: the whole workflow rehearsed (`step` None), or one of its steps (`--only`).

    Options that do not go together are refused here, as usage errors (exit 2), whoever builds the settings.
    """

    manifest: Path  # the family's release.toml or its directory
    step: Step | None = None
    hub: str = "local"  # `local` (started for the rehearsal), a Hub URL, or `manifest`
    tag: str | None = None
    work_dir: Path | None = None  # the rehearsal's workspaces (default: <family>/.hfrelease/release)
    artifacts: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    hub_root: Path | None = None
    workflow_file: Path | None = None  # the rehearsal's workflow (default: the nearest release.yml)
    from_bundle: Path | None = None
    attestation: Path | None = None
    trusted: bool = False  # the rehearsal publishes by trusted publishing (`hfrelease/ci/trusted_hub.py`)

    def __post_init__(self) -> None:
        if self.step is None and (self.artifacts or self.gates):
            raise UsageError("--artifact and --gate apply with --only: the rehearsal runs the workflow as written "
                             "(cut the manifest down instead)", hint=_HELP)
        if (self.from_bundle is not None or self.attestation is not None) and self.step != "publish":
            raise UsageError("--from-bundle and --attestation apply with --only publish", hint=_HELP)
        if self.attestation is not None and self.from_bundle is None:
            raise UsageError("--attestation needs --from-bundle (it signs the MANIFESTs of that bundle)", hint=_HELP)

    def step_settings(self) -> StepSettings:
        """The settings of the step, its manifest loaded."""
        from hfrelease.manifest import load_manifest

        # Publishing a bundle made elsewhere needs no source file here (the publish job's runner has no weights).
        return StepSettings(manifest=load_manifest(self.manifest, check_files=self.from_bundle is None), tag=self.tag,
                            artifacts=self.artifacts, gates=self.gates, hub=self.hub, hub_root=self.hub_root,
                            work_dir=self.work_dir, from_bundle=self.from_bundle, attestation=self.attestation)


def rehearse_stage(settings: ReleaseSettings, *, emit: Callable[[Line], None]) -> RehearsalReport:
    """The release workflow run on this machine, job by job, each job's lines to `emit` as it runs (in a
    fold each on GitHub Actions); a job's failure is the report's `error`, never raised."""
    from hfrelease.ci.github import CiEnvironment
    from hfrelease.ci.rehearsal import rehearse
    from hfrelease.manifest import find_manifest
    from hfrelease.stages.release_view import JobLines

    work_dir = settings.work_dir or find_manifest(settings.manifest).parent / ".hfrelease" / "release"
    return rehearse(settings.manifest, work_dir=work_dir, hub=settings.hub, tag=settings.tag,
                    hub_root=settings.hub_root, workflow_file=settings.workflow_file, trusted=settings.trusted,
                    events=JobLines(emit, folds=CiEnvironment.detect().github_actions))


@dataclass(frozen=True, kw_only=True)
class StepSettings:
    """One step of the release workflow: the family, the tag being released, what it is restricted to."""

    manifest: Manifest
    tag: str | None = None  # must be the manifest's release tag when given
    artifacts: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    hub: str = "manifest"  # publish: a Hub URL, `local`, or `manifest` ([publish].endpoint / HF_ENDPOINT)
    hub_root: Path | None = None
    work_dir: Path | None = None  # publish: where the release is downloaded back to (default: a temp dir)
    from_bundle: Path | None = None  # publish: the bundle another job wrote, checked against its MANIFESTs
    attestation: Path | None = None  # publish: shipped beside each MANIFEST (needs from_bundle)


def _selected(settings: StepSettings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The selection checked against the manifest, after the tag (a wrong tag stops every step)."""
    from hfrelease.manifest.selection import select
    from hfrelease.publish.decision import check_tag

    chosen = select(settings.manifest, artifacts=settings.artifacts, gates=settings.gates)
    check_tag(settings.manifest, settings.tag)
    return chosen.artifacts, chosen.gates


@dataclass(frozen=True, kw_only=True)
class MatrixReport:
    """The eval matrix: one job per artifact with a gate to run, and per draft."""

    entries: tuple[MatrixEntry, ...]

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        return {"include": [e.as_dict() for e in self.entries]}


def check_step(settings: StepSettings) -> MatrixReport:
    """The check job: the tag, everything `hfrelease check` checks (the serve guard, the family tree, the
    preflight, the release tag on the Hub), the eval matrix (to `GITHUB_OUTPUT` as `matrix`)."""
    from hfrelease.ci.github import CiEnvironment, append_summary, markdown_table, set_output
    from hfrelease.publish.decision import check_drafts_served, eval_matrix
    from hfrelease.stages.check import release_check

    loaded = settings.manifest
    artifacts, gates = _selected(settings)
    # Exactly `hfrelease check`, on the GitHub-hosted runner: what the bundle would refuse (a file outside the
    # tree, a token, a pickle), a placeholder plugin, task data that is not there, a release tag already out,
    # stop the release here instead of in a later job after every eval job has run.
    _, notes = release_check(loaded.root)
    entries = eval_matrix(loaded, artifacts, gates)
    check_drafts_served(loaded, entries)
    if not entries:
        raise ConfigError("hfrelease release", [ConfigProblem(
            location="gate", message="no artifact has a gate to run: the eval matrix would be empty")])
    report = MatrixReport(entries=tuple(entries))
    ci = CiEnvironment.detect()
    if ci.output is not None:
        set_output(ci.output, "matrix", json.dumps(report.as_dict()))
    if ci.step_summary is not None:
        said = "".join(f"\n- note: {n}" for n in notes)
        append_summary(ci.step_summary, f"### Release {loaded.family.name} {loaded.tag_name()}: eval matrix\n\n"
                       + markdown_table(("artifact", "published"), [(e.artifact, e.publish) for e in entries])
                       + (f"\n\nPreflight:\n{said}" if said else ""))
    return report


def gate_step(settings: StepSettings, *, cache: HashCache | None = None) -> GateDecision:
    """The merge job's gate: every recorded gate of the merged ledger judged; `decision.error()` stops the
    release when a published artifact's gate failed, is void or is missing."""
    from hfrelease.ci.github import CiEnvironment, append_summary, draft_gate_summary, gate_summary
    from hfrelease.ledger.store import Ledger
    from hfrelease.publish.decision import decide_gates

    loaded = settings.manifest
    artifacts, gates = _selected(settings)
    cache = cache or default_hash_cache()
    decision = decide_gates(loaded, ledger=Ledger(loaded.ledger_dir), hash_cache=cache, artifacts=artifacts,
                            gates=gates)
    cache.save()
    ci = CiEnvironment.detect()
    if ci.step_summary is not None:
        allowed = "".join(f"\n- allowed (publish = false): {p.text}" for p in decision.allowed)
        drafts = ("\n\n" + draft_gate_summary(decision.draft_checks, title="### Draft gates after the merge")
                  if decision.draft_checks else "")
        append_summary(ci.step_summary, gate_summary(decision.rows, title="Gates after the merge") + drafts + "\n"
                       + allowed)
    return decision


def publish_step(
    settings: StepSettings, *, cache: HashCache | None = None, echo: Callable[[str], None],
) -> tuple[PublishReport, tuple[VerifiedRepo, ...]]:
    """The publish job: publish all-or-nothing (never a dry run), then download every tag back and verify it."""
    from hfrelease.ci.github import CiEnvironment, append_summary, markdown_table

    loaded = settings.manifest
    artifacts, _ = _selected(settings)
    cache = cache or default_hash_cache()
    out_dir = (settings.work_dir or Path(tempfile.mkdtemp(prefix="hfrelease-verify-"))) / "verify"
    report, verified = publish_and_verify(loaded, hub=settings.hub, hub_root=settings.hub_root, artifacts=artifacts,
                                          out_dir=out_dir, cache=cache, echo=echo,
                                          from_bundle=settings.from_bundle, attestation=settings.attestation)
    cache.save()
    outcome = report.outcome
    assert outcome is not None  # publish_and_verify never dry-runs
    ci = CiEnvironment.detect()
    if ci.step_summary is not None:
        append_summary(ci.step_summary, f"### Published {loaded.family.name} {outcome.tag}: {outcome.message}\n\n"
                       + markdown_table(("repo", "status", "commit"),
                                        [(o.repo, o.status, (o.commit or "")[:12]) for o in outcome.repos]))
    return report, verified


def publish_and_verify(
    manifest: Manifest,
    *,
    hub: str,
    hub_root: Path | None,
    artifacts: Sequence[str],
    out_dir: Path,
    cache: HashCache | None,
    echo: Callable[[str], None],
    on_event: Callable[..., None] | None = None,
    from_bundle: Path | None = None,
    attestation: Path | None = None,
) -> tuple[PublishReport, tuple[VerifiedRepo, ...]]:
    """The publish job: release all-or-nothing (never a dry run), then download every tag back and verify it.

    `hub = manifest` is [publish].endpoint, or `HF_ENDPOINT` when set (huggingface_hub's own override: a
    rehearsal's jobs point it at the built-in Hub).
    """
    from hfrelease.ci.rehearsal import MANIFEST_HUB
    from hfrelease.files.sources import hub_access
    from hfrelease.publish import LOCAL, resolve_token, trusted
    from hfrelease.stages.publish import PublishSettings, VerifySettings, publish_stage, verify_stage

    target_hub = (os.environ.get("HF_ENDPOINT") or manifest.publish.endpoint) if hub == MANIFEST_HUB else hub
    if target_hub != LOCAL and resolve_token() is None and not trusted.available():
        # `hfrelease publish` without a token is a dry run that exits 0; a release job must not pass that way.
        raise PublishError(
            f"no Hub token to publish to {target_hub} with",
            hint="Give the publish job `id-token: write` and add it as a trusted publisher of each repo on the Hub "
                 "(one short-lived token per repo), or give its environment an HF_TOKEN secret (a fine-grained "
                 "token with write access to the family's repos).")
    with hub_access():
        # The same stage functions `hfrelease publish` and `hfrelease verify` call.
        report = publish_stage(PublishSettings(manifest=manifest, hub=target_hub, hub_root=hub_root, dry_run=False,
                                               artifacts=tuple(artifacts), from_bundle=from_bundle,
                                               attestation=attestation), cache=cache, echo=echo,
                               on_event=on_event).report
        if report.outcome is None or report.outcome.status == "staged":
            # [publish].pr: the repos wait as pull requests for review; there is no release tag to verify yet.
            return report, ()
        if out_dir.exists():
            shutil.rmtree(out_dir)
        verified = verify_stage(VerifySettings(manifest=manifest, out=out_dir, hub=target_hub, hub_root=hub_root,
                                               artifacts=tuple(artifacts)))
        if verified.error is not None:
            raise verified.error
    return report, verified.verified
