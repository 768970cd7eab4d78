"""The bundle: for each published artifact, the exact files its Hub repo will hold, as data.

Where an artifact's files come from:

    <source dir>                        weights, config, tokenizer, generation config, recipe (by name)
    <family>/<artifact-id>/             what `hfrelease render` wrote: README.md, CITATION.cff, plots/,
                                        .eval_results/ (absent before the first render: noted, not fatal)
    artifact.files                      declared extras (train_command.txt, val_metrics.json, ...)
    [serve].plugin                      the vLLM plugin package, as vllm_plugin/ (checked: it installs
                                        and registers with vLLM)
    <family>/results/<artifact-id>/     the ledger records behind the card, their samples files and every
                                        raw file a record names (*.bench.jsonl, *.metrics.txt,
                                        *.requests.jsonl, *.fidelity.jsonl), as ledger/
    MANIFEST                            sha256 and size of all of the above

Every file, wherever it comes from, goes through one allowlist (`allowlist.admit`): it resolves inside
the family directory or the artifact's source, is a regular file, has no credential, pickle or cache name,
and is text scanned for tokens or a binary format a model repo holds. Everything is decided before
anything is uploaded, and every refusal (those, version control or cache directories, a file nobody
declared, two files claiming one repo path) is reported in one go (`gather.py`; `hfrelease check` reports
the same through `problems.file_problems`). Each file is hashed once, through the shared `HashCache`:
the sha256 in MANIFEST is the one the upload hands to huggingface_hub, which then never reads the file
to hash it again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hfrelease.bundle.candidates import Candidates, Refusal
from hfrelease.bundle.checksums import MANIFEST_NAME, render_manifest
from hfrelease.bundle.gather import (
    PLUGIN_PREFIX,
    SourceFetcher,
    candidates_for,
    gather,
    source_dir,
)
from hfrelease.bundle.plugin_check import PluginChecker, PluginReport, check_plugin
from hfrelease.errors import ExitCode, HfreleaseError
from hfrelease.files.hashing import FileHash, HashCache, hash_files
from hfrelease.manifest import Artifact, Manifest
from hfrelease.manifest.selection import select

HASH_THREADS = 4  # at most; fewer on fewer cores (one thread per core keeps reads sequential per file)
SMALL_FILE = 16 * 1024 * 1024  # below this, a file is hashed on the calling thread (see `_hash_all`)


@dataclass(frozen=True, kw_only=True)
class BundleFile:
    """One file of a repo: where it goes, what it is, and where its bytes come from."""

    path: str  # POSIX path inside the repo
    size: int
    sha256: str
    role: str
    source: Path | None = None  # the local file; None for generated content (MANIFEST)
    content: bytes | None = field(default=None, repr=False)
    # Already in the repo at the pinned revision (a repo published from itself): never downloaded, never
    # uploaded; its sha256 is the Hub's LFS oid (see `_gather_own_repo`).
    in_repo: bool = False

    def read(self) -> bytes:
        if self.content is not None:
            return self.content
        if self.source is None:  # construction guarantees one of the two, or in_repo
            where = "held by the repo on the Hub" if self.in_repo else "none"
            raise ValueError(f"{self.path}: no local content ({where})")
        return self.source.read_bytes()


class BundleRefusedError(HfreleaseError):
    """Some files cannot go into a repo; carries every refusal found."""

    exit_code = ExitCode.CONFIG

    def __init__(self, refusals: Sequence[Refusal]) -> None:
        self.refusals = tuple(refusals)
        lines = "\n".join(f"  - {r.render()}" for r in self.refusals)
        count = len(self.refusals)
        super().__init__(
            f"{count} file{'s' if count != 1 else ''} cannot be published:\n{lines}",
            hint="Nothing was uploaded. Fix each file named above and run `hfrelease bundle` again.",
        )


@dataclass(frozen=True, kw_only=True)
class RepoBundle:
    """What one repo will hold: every file (MANIFEST included), plus notes for the plan."""

    artifact_id: str
    repo: str
    files: tuple[BundleFile, ...]  # sorted by path
    content_hash: str  # sha256 of the weights, as ledger records and cards cite it
    notes: tuple[str, ...] = ()
    plugin: PluginReport | None = None
    # Set when the artifact is sourced from its own repo (source.hub == repo) at this pinned revision: the
    # weights are already there, so publishing adds the card and friends on top and must find the repo
    # still holding exactly these weights (`hfrelease.publish.release.check_pinned_weights`).
    pinned: str | None = None

    def file(self, path: str) -> BundleFile | None:
        return next((f for f in self.files if f.path == path), None)

    @property
    def manifest(self) -> BundleFile:
        found = self.file(MANIFEST_NAME)
        if found is None:  # bundle_family always adds it
            raise KeyError(MANIFEST_NAME)
        return found

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True, kw_only=True)
class FamilyBundle:
    """Every repo of a release, and the release's settings publish needs."""

    family: str
    version: str
    tag: str
    owner: str
    collection: str | None
    private: bool
    repos: tuple[RepoBundle, ...]
    bytes_hashed: int | None  # bytes this bundle read to hash (None without a HashCache to count them)


def bundle_family(
    manifest: Manifest,
    *,
    cache: HashCache | None = None,
    artifacts: Sequence[str] = (),
    plugin_checker: PluginChecker | None = check_plugin,
    source_fetcher: SourceFetcher | None = None,
) -> FamilyBundle:
    """Plan every published artifact's repo; raise `BundleRefusedError` listing every file that cannot go."""
    chosen = [a for a in manifest.artifact if a.publish and (not artifacts or a.id in artifacts)]
    select(manifest, artifacts=artifacts)
    read_before = cache.bytes_read if cache is not None else 0
    plugins: dict[Path, PluginReport] = {}
    gathered: list[tuple[Artifact, Candidates, Path | None]] = []
    for artifact in chosen:
        candidates = candidates_for(manifest, artifact)
        source = source_dir(manifest, artifact, candidates, source_fetcher)
        plugin_dir = gather(manifest, artifact, source, candidates)
        gathered.append((artifact, candidates, plugin_dir))
    refusals = [r for _, c, _ in gathered for r in c.refusals]
    if refusals:
        raise BundleRefusedError(refusals)

    digests = _hash_all([c for _, c, _ in gathered], cache)
    repos = []
    for artifact, candidates, plugin_dir in gathered:
        plugin = None
        if plugin_dir is not None and plugin_checker is not None:
            if plugin_dir not in plugins:
                files = [p.removeprefix(PLUGIN_PREFIX) for p in candidates.by_path if p.startswith(PLUGIN_PREFIX)]
                plugins[plugin_dir] = plugin_checker(plugin_dir, sorted(files))
            plugin = plugins[plugin_dir]
        repos.append(_repo_bundle(manifest, artifact, candidates, digests, plugin))
    return FamilyBundle(
        family=manifest.family.name, version=manifest.family.version, tag=manifest.tag_name(),
        owner=manifest.family.owner, collection=manifest.publish.collection or manifest.family.collection,
        private=manifest.publish.private, repos=tuple(repos),
        bytes_hashed=(cache.bytes_read - read_before) if cache is not None else None,
    )  # fmt: skip


def _hash_threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(HASH_THREADS, cores))


def _hash_all(gathered: Sequence[Candidates], cache: HashCache | None) -> dict[Path, FileHash]:
    """Every distinct file of every repo hashed once: large files on all cores, small ones alongside.

    Hashing is the one CPU-bound step before the first upload (a bare `create_commit` hashes as much,
    file after file; see BENCHMARKS.md). hashlib and file reads release the GIL, so on a machine with
    free cores large files are hashed by up to HASH_THREADS threads, largest first to keep them evenly
    busy to the end. Small files
    (configs, tokenizer, card, ledger records) cost little to read but each costs the cache one durable
    save (~10 ms of fsync); they are hashed meanwhile on the calling thread, whose waits then overlap
    the large files' hashing instead of following it. A file shared by two repos is read once.
    """
    reals = sorted({real for found in gathered for real, _ in found.by_path.values()},
                   key=lambda real: (-real.stat().st_size, str(real)))  # fmt: skip
    large = [real for real in reals if real.stat().st_size >= SMALL_FILE]
    small = [real for real in reals if real.stat().st_size < SMALL_FILE]

    def one(real: Path) -> FileHash:
        return hash_files(real.parent, [real.name], cache)[0]

    with ThreadPoolExecutor(max_workers=_hash_threads(), thread_name_prefix="hfrelease-hash") as pool:
        pending = pool.map(one, large)
        digests = {real: one(real) for real in small}
        digests.update(zip(large, pending, strict=True))
    return digests


def _repo_bundle(
    manifest: Manifest, artifact: Artifact, found: Candidates, digests: dict[Path, FileHash],
    plugin: PluginReport | None,
) -> RepoBundle:  # fmt: skip
    files = [
        BundleFile(path=path, size=digests[real].size, sha256=digests[real].sha256, role=role, source=real)
        for path, (real, role) in found.by_path.items()
    ] + [
        BundleFile(path=path, size=digest.size, sha256=digest.sha256, role=role, in_repo=True)
        for path, (digest, role) in found.in_repo.items() if path not in found.by_path
    ]
    weights = sorted((f for f in files if f.role == "weights"), key=lambda f: f.path)
    # The same format as hfrelease.files.hashing.hash_artifact, so MANIFEST names the hash cards cite.
    lines = "".join(f"{f.sha256}  {f.path}\n" for f in weights)
    content_hash = hashlib.sha256(lines.encode()).hexdigest()
    header = [
        f"family: {manifest.family.name} {manifest.family.version} (tag {manifest.tag_name()})",
        f"artifact: {artifact.id} -> {artifact.repo}",
        f"weights sha256: {content_hash}",
    ]
    content = render_manifest((FileHash(path=f.path, size=f.size, sha256=f.sha256) for f in files), header=header)
    files.append(
        BundleFile(path=MANIFEST_NAME, size=len(content), sha256=hashlib.sha256(content).hexdigest(), role="manifest",
                   content=content)
    )  # fmt: skip
    notes = list(found.notes)
    source = artifact.source
    pinned = source.revision if source.hub is not None and source.hub == artifact.repo else None
    if pinned is not None:
        notes.append(f"weights already in {artifact.repo} at the pinned {pinned[:12]}: not uploaded again; the "
                     "release commit adds the card and its files on top")
    if not weights:
        notes.append("no *.safetensors weights: the repo will hold no model")
    return RepoBundle(
        artifact_id=artifact.id, repo=artifact.repo, files=tuple(sorted(files, key=lambda f: f.path)),
        content_hash=content_hash, notes=tuple(notes), plugin=plugin, pinned=pinned,
    )  # fmt: skip
