"""The bundle, publish and verify stages: what each repo will hold, its all-or-nothing release, and the
release downloaded back and checked (optionally served).

`bundle_stage` is `hfrelease bundle`, `publish_stage` is `hfrelease publish`, `verify_stage` is
`hfrelease verify`; the release workflow's publish job (`hfrelease release --only publish`) runs
`publish_stage` then `verify_stage` (`hfrelease.stages.release`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrelease.errors import ExitCode, PublishError, UsageError
from hfrelease.files.cache import default_hash_cache

if TYPE_CHECKING:
    from hfrelease.bundle import FamilyBundle
    from hfrelease.files.hashing import HashCache
    from hfrelease.manifest import Manifest
    from hfrelease.publish import PublishReport
    from hfrelease.publish.events import OnEvent
    from hfrelease.publish.readback import ServedCheck, VerifiedRepo

Say = Callable[[str], None]


def _load(manifest: Path | Manifest, artifacts: tuple[str, ...], *,
          serve: str | None = None) -> tuple[Manifest, tuple[str, ...]]:
    """The manifest and the --artifact selection checked against it (`hfrelease.manifest.selection`)."""
    from hfrelease.manifest import Manifest, find_manifest, load_manifest
    from hfrelease.manifest.selection import select

    loaded = manifest if isinstance(manifest, Manifest) else load_manifest(find_manifest(manifest))
    return loaded, select(loaded, artifacts=artifacts, serve=serve).artifacts


@dataclass(frozen=True, kw_only=True)
class BundleSettings:
    """What `hfrelease bundle` was asked to do."""

    manifest: Path
    artifacts: tuple[str, ...] = ()
    out: Path | None = None  # also write each repo's files under out/<artifact-id>/


@dataclass(frozen=True, kw_only=True)
class BundleReport:
    """Each repo's files with their sha256 and size, and where they were written (if asked)."""

    bundle: FamilyBundle
    written: tuple[Path, ...] = ()
    unpublished: tuple[str, ...] = ()  # the selected artifacts left out by `publish = false`
    selected: bool = False  # --artifact named some: "nothing to publish" speaks of them, not the family

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        b = self.bundle
        return {
            "family": b.family, "version": b.version, "tag": b.tag, "bytes_hashed": b.bytes_hashed,
            "unpublished": list(self.unpublished),
            "repos": [{
                "artifact": r.artifact_id, "repo": r.repo, "weights_sha256": r.content_hash, "notes": list(r.notes),
                "plugin_entry_points": list(r.plugin.entry_points) if r.plugin else [],
                "files": [{"path": f.path, "role": f.role, "size": f.size, "sha256": f.sha256} for f in r.files],
            } for r in b.repos],
        }  # fmt: skip


def bundle_stage(settings: BundleSettings, *, cache: HashCache | None = None) -> BundleReport:
    """Every published repo's files through the one allowlist, hashed (and written under `out` if set)."""
    from hfrelease.bundle import bundle_family, write_bundle

    cache = cache or default_hash_cache()
    loaded, artifacts = _load(settings.manifest, settings.artifacts)
    result = bundle_family(loaded, cache=cache, artifacts=artifacts)
    cache.save()
    written = tuple(write_bundle(result, settings.out)) if settings.out is not None else ()
    unpublished = tuple(a.id for a in loaded.artifact if not a.publish and (not artifacts or a.id in artifacts))
    return BundleReport(bundle=result, written=written, unpublished=unpublished, selected=bool(artifacts))


@dataclass(frozen=True, kw_only=True)
class PublishSettings:
    """What `hfrelease publish` was asked to do."""

    manifest: Path | Manifest
    artifacts: tuple[str, ...] = ()
    hub: str | None = None  # a Hub URL or `local`; default [publish].endpoint
    hub_root: Path | None = None
    dry_run: bool | None = None  # None: a dry run exactly when there is no token
    pr: bool | None = None  # None: [publish].pr
    allow_failed_gates: bool = False
    # A bundle another job wrote (`hfrelease bundle --out DIR`): published as it is, checked against its
    # MANIFESTs, nothing built; `attestation` ships beside each MANIFEST (see `publish_family`).
    from_bundle: Path | None = None
    attestation: Path | None = None


@dataclass(frozen=True, kw_only=True)
class PublishStageReport:
    """The release as planned and, unless a dry run, how it ended."""

    report: PublishReport

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK  # every failure is an error raised, never a report

    def as_dict(self) -> dict[str, Any]:
        report, outcome = self.report, self.report.outcome
        return {
            "endpoint": report.endpoint, "tag": report.plan.tag, "dry_run": report.dry_run,
            "failed_gates_allowed": [{"artifact": p.artifact, "gate": p.gate, "verdict": p.kind, "text": p.text}
                                     for p in report.gates.failed],
            "unjudged_gates": [{"artifact": p.artifact, "gate": p.gate, "verdict": p.kind, "text": p.text}
                               for p in report.gates.unjudged],
            "dry_run_reason": report.dry_run_reason, "token": report.token_source,
            "repos": [{
                "repo": r.repo, "artifact": r.bundle.artifact_id, "action": r.action, "tag_state": r.tag_state,
                "tag_commit": r.tag_commit, "main": r.main.commit if r.main else None,
                "added": [{"path": f.path, "size": f.size} for f in r.changes.added],
                "changed": [{"path": f.path, "size": f.size} for f in r.changes.changed],
                "deleted": list(r.changes.deleted), "unchanged": len(r.changes.unchanged),
                "bytes_to_send": r.changes.bytes_to_send, "card_diff": r.card_diff, "notes": list(r.bundle.notes),
            } for r in report.plan.repos],
            "outcome": None if outcome is None else {
                "status": outcome.status, "message": outcome.message,
                "repos": [{"repo": o.repo, "status": o.status, "commit": o.commit, "staged_ref": o.staged_ref}
                          for o in outcome.repos],
            },
        }  # fmt: skip


def publish_stage(
    settings: PublishSettings, *, cache: HashCache | None = None, echo: Say | None = None,
    on_event: OnEvent | None = None,
) -> PublishStageReport:
    """Bundle, plan against the Hub and release all-or-nothing (`publish_family`); `echo` gets log lines and
    `on_event` the structured progress a live display draws."""
    from hfrelease.publish import publish_family

    cache = cache or default_hash_cache()  # the one `eval` fills: weights hashed there are not read again
    loaded, artifacts = _load(settings.manifest, settings.artifacts)
    report = publish_family(
        loaded, hub=settings.hub, hub_root=settings.hub_root, dry_run=settings.dry_run,
        pr=settings.pr, artifacts=artifacts, cache=cache, echo=echo, on_event=on_event,
        allow_failed_gates=settings.allow_failed_gates, from_bundle=settings.from_bundle,
        attestation=settings.attestation,
    )  # fmt: skip
    cache.save()
    return PublishStageReport(report=report)


@dataclass(frozen=True, kw_only=True)
class VerifySettings:
    """What `hfrelease verify` was asked to do."""

    manifest: Path | Manifest
    out: Path | None = None  # where the release is downloaded (default: a new temporary directory)
    hub: str | None = None  # default [publish].endpoint
    hub_root: Path | None = None
    artifacts: tuple[str, ...] = ()
    bundle_dir: Path | None = None  # default: the MANIFESTs `publish` kept
    serve: str | None = None  # also serve this artifact's downloaded copy and ask it a question
    attested_by: str | None = None  # also check each attestation's signature: a GitHub Actions run of OWNER/REPO


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    """Every repo downloaded back and checked; the served answer when asked for."""

    verified: tuple[VerifiedRepo, ...]
    served: ServedCheck | None = None
    # Where the download is now: `--out`, or the temporary directory kept because a check failed; None when
    # the temporary directory was removed (every check passed).
    download: Path | None = None
    temporary: bool = False  # the download went to a temporary directory (no `--out`)

    @property
    def error(self) -> PublishError | None:
        """One error naming every repo that failed (exit 7), or None."""
        from hfrelease.publish.readback import verification_error

        return verification_error(self.verified)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.PUBLISH_FAILED if self.error is not None else ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        served = self.served
        return {
            "ok": all(v.ok for v in self.verified),
            "verified": [{"artifact": v.artifact_id, "repo": v.repo, "tag": v.tag, "commit": v.commit, "ok": v.ok,
                          "directory": str(v.directory), "files": v.files, "compared_with": list(v.compared_with),
                          "local_bundle": str(v.local_bundle) if v.local_bundle else None,
                          "problems": list(v.problems)} for v in self.verified],
            "served": None if served is None else {"artifact": served.artifact_id, "command": served.command,
                                                   "question": served.question, "answer": served.answer},
            "download": str(self.download) if self.download is not None else None,
            "download_removed": self.temporary and self.download is None,
        }  # fmt: skip


def verify_stage(
    settings: VerifySettings, *, announce: Say | None = None,
    serving: Callable[[str], AbstractContextManager[object]] | None = None,
) -> VerifyReport:
    """Download each published repo's release tag and check every file; serve one copy if asked, but only
    when every check passed (an answer must not vouch for files nobody released).

    `announce` is told when a local Hub starts; `serving(artifact_id)` is open while vLLM serves the copy.
    Without `settings.out` the release is downloaded to a temporary directory: kept, and named in the
    report, when a check failed; otherwise removed (on an error, all but the served copy's server log, which
    the error names). A family's weights downloaded whole and left in /tmp filled it for good.
    """
    import tempfile

    loaded, artifacts = _load(settings.manifest, settings.artifacts, serve=settings.serve)
    if settings.out is not None:
        report = _verify_into(settings.out, loaded, artifacts, settings, announce=announce, serving=serving)
        return dataclasses.replace(report, download=settings.out)
    out = Path(tempfile.mkdtemp(prefix="hfrelease-verify-"))
    try:
        report = _verify_into(out, loaded, artifacts, settings, announce=announce, serving=serving)
    except BaseException:
        _remove_download(out, keep_logs=True)
        raise
    if report.error is not None:
        return dataclasses.replace(report, download=out, temporary=True)
    _remove_download(out, keep_logs=False)
    return dataclasses.replace(report, temporary=True)


def _remove_download(out: Path, *, keep_logs: bool) -> None:
    """Remove a temporary download; with `keep_logs`, its `*.log` files stay (and so does `out`, if any)."""
    import shutil

    for entry in list(out.iterdir()) if out.is_dir() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        elif not (keep_logs and entry.name.endswith(".log")):
            entry.unlink(missing_ok=True)
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def _verify_into(
    out: Path, loaded: Manifest, artifacts: tuple[str, ...], settings: VerifySettings, *, announce: Say | None,
    serving: Callable[[str], AbstractContextManager[object]] | None,
) -> VerifyReport:
    from hfrelease.publish import open_hub, resolve_token
    from hfrelease.publish.readback import serve_downloaded, verify_family

    with open_hub(settings.hub or loaded.publish.endpoint, family_root=loaded.root, hub_root=settings.hub_root,
                  announce=announce) as target:
        token = target.token or resolve_token()
        verified = verify_family(loaded, endpoint=target.endpoint, token=token.value if token else None,
                                 out_dir=out, artifacts=artifacts, bundle_dir=settings.bundle_dir,
                                 attested_by=settings.attested_by)
    report = VerifyReport(verified=tuple(verified))
    if settings.serve is None or report.error is not None:
        return report
    copy = next((v.directory for v in verified if v.artifact_id == settings.serve), None)
    if copy is None:
        raise UsageError(f"--serve {settings.serve}: not among the verified artifacts")
    with (serving or (lambda _: contextlib.nullcontext()))(settings.serve):
        served = serve_downloaded(loaded, settings.serve, copy, log_path=out / f"{settings.serve}.server.log")
    return VerifyReport(verified=report.verified, served=served)
