"""Write a bundle to disk (`hfrelease bundle --out DIR`): one directory per repo, exactly as it will upload;
and read one back (`read_bundle`), checked against its MANIFESTs, for a publish job that did not make it."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from hfrelease.bundle.checksums import MANIFEST_NAME, parse_manifest
from hfrelease.bundle.plan import BundleFile, FamilyBundle, RepoBundle
from hfrelease.errors import ExitCode, HfreleaseError
from hfrelease.files.atomic import write_atomic
from hfrelease.files.hashing import WEIGHT_SUFFIX, hash_files
from hfrelease.manifest import Manifest


def write_bundle(bundle: FamilyBundle, out: Path) -> list[Path]:
    """`out/<artifact-id>/...` per repo; files are hard links where possible (weights are large), else copies."""
    written = []
    for repo in bundle.repos:
        root = out / repo.artifact_id
        for item in repo.files:
            if item.in_repo:
                continue  # held by the repo on the Hub at the pinned revision (listed in MANIFEST all the same)
            target = root / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            if item.source is None:
                write_atomic(target, item.read())
                continue
            try:
                os.link(item.source, target)
            except OSError:  # another filesystem, or links not allowed
                shutil.copyfile(item.source, target)
        written.append(root)
    return written


# The attestation bundle (Sigstore bundle JSON of the MANIFEST's SLSA provenance) a release may ship beside
# MANIFEST; not listed in it (it signs MANIFEST's digest, so it cannot be inside what it signs).
ATTESTATION_NAME = "MANIFEST.sigstore.json"


class BundleMismatchError(HfreleaseError):
    """A bundle directory does not hold what its MANIFEST lists: nothing may be published from it."""

    exit_code = ExitCode.PUBLISH_FAILED


def read_bundle(
    manifest: Manifest, directory: Path, *, artifacts: Sequence[str] = (), attestation: Path | None = None
) -> FamilyBundle:
    """The bundle `write_bundle` wrote into `directory` (another job's `hfrelease bundle --out`), every file
    checked against its repo's MANIFEST (sha256, size; nothing missing, nothing unlisted) before anything is
    trusted; with `attestation`, that file ships beside each MANIFEST as `ATTESTATION_NAME`."""
    chosen = [a for a in manifest.artifact if a.publish and (not artifacts or a.id in artifacts)]
    problems: list[str] = []
    repos = []
    extra = attestation.read_bytes() if attestation is not None else None
    for artifact in chosen:
        root = directory / artifact.id
        try:
            manifest_bytes = (root / MANIFEST_NAME).read_bytes()
            entries = parse_manifest(manifest_bytes)
        except (OSError, ValueError) as error:
            problems.append(f"{artifact.id}: no readable {MANIFEST_NAME} ({error})")
            continue
        pinned = artifact.source.revision if artifact.source.hub is not None and artifact.source.hub == artifact.repo \
            else None
        files = [BundleFile(path=MANIFEST_NAME, size=len(manifest_bytes), role="manifest", content=manifest_bytes,
                            sha256=hashlib.sha256(manifest_bytes).hexdigest())]
        present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}
        for unlisted in sorted(present - set(entries) - {MANIFEST_NAME, ATTESTATION_NAME}):
            problems.append(f"{artifact.id}/{unlisted}: not listed in its MANIFEST")
        for path, entry in entries.items():
            role = "weights" if path.endswith(WEIGHT_SUFFIX) else "file"
            if path not in present:
                if pinned is None:
                    problems.append(f"{artifact.id}/{path}: listed in its MANIFEST, missing")
                else:  # held by the repo at the pinned revision: `write_bundle` does not write it
                    files.append(BundleFile(path=path, size=entry.size, sha256=entry.sha256, role=role, in_repo=True))
                continue
            source = root / path
            if source.is_symlink() or not source.is_file():
                problems.append(f"{artifact.id}/{path}: not a regular file")
                continue
            digest = hash_files(root, [path])[0]
            if (digest.sha256, digest.size) != (entry.sha256, entry.size):
                problems.append(f"{artifact.id}/{path}: sha256 {digest.sha256[:12]} / {digest.size} bytes, its "
                                f"MANIFEST says {entry.sha256[:12]} / {entry.size} bytes")
                continue
            files.append(BundleFile(path=path, size=entry.size, sha256=entry.sha256, role=role, source=source))
        if extra is not None:
            files.append(BundleFile(path=ATTESTATION_NAME, size=len(extra), role="attestation", content=extra,
                                    sha256=hashlib.sha256(extra).hexdigest()))
        weights = sorted((f for f in files if f.role == "weights"), key=lambda f: f.path)
        content_hash = hashlib.sha256("".join(f"{f.sha256}  {f.path}\n" for f in weights).encode()).hexdigest()
        repos.append(RepoBundle(artifact_id=artifact.id, repo=artifact.repo, content_hash=content_hash,
                                files=tuple(sorted(files, key=lambda f: f.path)), pinned=pinned,
                                notes=(f"from the bundle directory {root}, checked against its MANIFEST",)))
    if problems:
        raise BundleMismatchError(
            f"the bundle in {directory} does not match its MANIFESTs:\n" + "\n".join(f"  - {p}" for p in problems),
            hint="Nothing was uploaded. Make the bundle again (`hfrelease bundle MANIFEST --out DIR`) from the "
                 "release's own jobs; never edit it by hand.")
    return FamilyBundle(
        family=manifest.family.name, version=manifest.family.version, tag=manifest.tag_name(),
        owner=manifest.family.owner, collection=manifest.publish.collection or manifest.family.collection,
        private=manifest.publish.private, repos=tuple(repos), bytes_hashed=None,
    )  # fmt: skip
