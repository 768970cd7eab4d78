"""The bundle: for each published artifact, the exact files its Hub repo will hold, as data.

Where an artifact's files come from:

    <source dir>                        weights, config, tokenizer, generation config, recipe (by name)
    <family>/<artifact-id>/             what `hfrelease render` wrote: README.md, CITATION.cff, plots/,
                                        .eval_results/ (absent before the first render: noted, not fatal)
    artifact.files                      declared extras (train_command.txt, val_metrics.json, ...)
    [serve].plugin                      the vLLM plugin package, as vllm_plugin/ (checked: it installs
                                        and registers with vLLM)
    <family>/results/<artifact-id>/     the ledger records behind the card, as ledger/
    MANIFEST                            sha256 and size of all of the above

Everything is decided before anything is uploaded, and every refusal (a credential file, pickle weights,
a link out of the directory, version control or cache directories, a file nobody declared, two files
claiming one repo path) is reported in one go. Each file is hashed once, through the shared `HashCache`:
the sha256 in MANIFEST is the one the upload hands to huggingface_hub, which then never reads the file
to hash it again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hfrelease.bundle import rules
from hfrelease.bundle.manifest_file import MANIFEST_NAME, ManifestEntry, render_manifest
from hfrelease.bundle.plugin_check import PluginChecker, PluginReport, check_plugin
from hfrelease.errors import ExitCode, HfreleaseError, UsageError
from hfrelease.ledger.hashing import FileHash, HashCache, hash_files
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Artifact, Manifest

RESERVED = (MANIFEST_NAME, ".gitattributes")  # the Hub's .gitattributes stays as the repo has it
RENDERED = {"README.md": "card", "CITATION.cff": "citation", "citation.bib": "citation"}
RENDERED_DIRS = {"plots": (".png", ".svg", ".jpg", ".jpeg", ".webp"), ".eval_results": (".yaml", ".yml")}
PLUGIN_PREFIX = "vllm_plugin/"
LEDGER_PREFIX = "ledger/"

HASH_THREADS = 4  # at most; fewer on fewer cores (one thread per core keeps reads sequential per file)
SMALL_FILE = 16 * 1024 * 1024  # below this, a file is hashed on the calling thread (see `_hash_all`)
SourceFetcher = Callable[[str, str], Path]  # (repo id, revision) -> local snapshot directory


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


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A file that cannot be published, and what to do about it."""

    artifact: str
    path: str
    reason: str
    fix: str

    def render(self) -> str:
        return f"[{self.artifact}] {self.path}: {self.reason} ({self.fix})"


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


@dataclass
class _Candidates:
    """Files gathered for one artifact before hashing: repo path -> real local path."""

    artifact: str
    by_path: dict[str, tuple[Path, str]] = field(default_factory=dict)
    in_repo: dict[str, tuple[FileHash, str]] = field(default_factory=dict)  # repo path -> (Hub's digest, role)
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def refuse(self, path: Path | str, reason: str, fix: str) -> None:
        self.refusals.append(Refusal(artifact=self.artifact, path=str(path), reason=reason, fix=fix))

    def add(self, repo_path: str, real: Path, role: str) -> None:
        if repo_path in RESERVED:
            self.refuse(real, f"would overwrite the repo's {repo_path}", "rename or remove the file")
            return
        if "\n" in repo_path or "\\" in repo_path:
            self.refuse(real, "the name contains a newline or backslash", "rename the file")
            return
        existing = self.by_path.get(repo_path)
        if existing is not None and existing[0] != real:
            self.refuse(real, f"{existing[0]} already goes to {repo_path} in the repo", "keep only one of them")
            return
        self.by_path[repo_path] = (real, role)


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
    unknown = set(artifacts) - {a.id for a in manifest.artifact}
    if unknown:
        raise UsageError(f"no artifact {', '.join(sorted(unknown))} in the manifest", hint="See `hfrelease check`.")
    read_before = cache.bytes_read if cache is not None else 0
    plugins: dict[Path, PluginReport] = {}
    gathered: list[tuple[Artifact, _Candidates, Path | None]] = []
    for artifact in chosen:
        candidates = _Candidates(artifact=artifact.id)
        source_dir = _source_dir(manifest, artifact, candidates, source_fetcher)
        plugin_dir = _gather(manifest, artifact, source_dir, candidates)
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


@dataclass(frozen=True, kw_only=True)
class _Source:
    """The artifact's checkpoint: its directory, the bound its links may point within, and its Hub origin.

    `hub` is "owner/name@<revision>" for a Hub source, whose directory is a snapshot in the Hugging Face
    cache: messages then name the file by its place in the Hub repo, never by the cache path (which a user
    cannot declare or edit).
    """

    directory: Path
    bound: Path
    hub: str | None = None

    def shown(self, rel: str) -> str:
        return f"{self.hub}/{rel}" if self.hub else str(self.directory / rel)


def _source_dir(
    manifest: Manifest, artifact: Artifact, candidates: _Candidates, fetcher: SourceFetcher | None
) -> _Source | None:
    """The artifact's checkpoint, downloading a Hub source (once, into the Hugging Face cache) if need be."""
    source = artifact.source
    if source.path is not None:
        directory = manifest.resolve(source.path)
        if not directory.is_dir():
            candidates.refuse(directory, "the artifact's source directory does not exist", "build or fix source.path")
            return None
        return _Source(directory=directory, bound=directory)
    if source.hub is None or source.revision is None:  # the manifest's validator guarantees one or the other
        return None
    if source.hub == artifact.repo and fetcher is None:
        _gather_own_repo(manifest, artifact, candidates)
        return None
    from hfrelease.sources import cache_repo_dir, download_snapshot

    snapshot = (fetcher or download_snapshot)(source.hub, source.revision)
    # A cache snapshot's files link to ../../blobs/: the repo folder of the cache bounds them.
    bound = cache_repo_dir(snapshot) or snapshot.resolve().parent.parent
    return _Source(directory=snapshot, bound=bound, hub=f"{source.hub}@{source.revision[:12]}")


def _trust_remote_code(manifest: Manifest, artifact: Artifact) -> bool:
    own = artifact.serve.trust_remote_code if artifact.serve else None
    return bool(own if own is not None else manifest.serve.trust_remote_code)


def _plugin_path(manifest: Manifest, artifact: Artifact) -> Path | None:
    relative = (artifact.serve.plugin if artifact.serve else None) or manifest.serve.plugin
    return manifest.resolve(relative) if relative else None


def _gather(
    manifest: Manifest, artifact: Artifact, source: _Source | None, found: _Candidates
) -> Path | None:
    """Collect every candidate file of `artifact` into `found`; return its plugin directory, if any."""
    declared = _declared(manifest, artifact, source.directory if source else None, found)
    # Declared files already judged (accepted or refused) are not judged again by the directory walks.
    claimed = {manifest.resolve(relative) for relative in artifact.files}
    if source is not None and source.hub is not None:
        _gather_hub(manifest, artifact, source, found)
    elif source is not None:
        directory = source.directory
        trust = _trust_remote_code(manifest, artifact)
        for rel, real in _walk(directory, source.bound, found):
            if real in claimed:
                continue
            if _refused_name(rel, real, found):
                continue
            if rules.is_model_file(rel, trust_remote_code=trust):
                found.add(rel, real, rules.role_of(rel))
                claimed.add(real)
                continue
            root_rel = os.path.relpath(directory / rel, manifest.root)
            found.refuse(
                directory / rel, "not a model file and not declared",
                f'add "{Path(root_rel).as_posix()}" to files of the [[artifact]] with id = "{artifact.id}" in '
                "release.toml, or delete it",
            )  # fmt: skip
    _gather_rendered(manifest, artifact, found, claimed)
    for real_path, repo_path in declared.items():
        found.add(repo_path, real_path, rules.role_of(repo_path))
    _gather_ledger(manifest, artifact, found)
    plugin = _plugin_path(manifest, artifact)
    if plugin is not None:
        if not plugin.is_dir():
            found.refuse(plugin, "the serve plugin directory does not exist", "fix [serve].plugin")
            return None
        for rel, real in _walk(plugin, plugin, found, plugin_tree=True):
            if not _refused_name(rel, real, found):
                found.add(PLUGIN_PREFIX + rel, real, "plugin")
    return plugin


def _gather_hub(manifest: Manifest, artifact: Artifact, source: _Source, found: _Candidates) -> None:
    """The model files of a Hub snapshot; what else the Hub repo holds is named in a note, never refused.

    A Hub repo always holds a `.gitattributes` (its LFS rules): it belongs to the repo and is never part of
    a bundle (`RESERVED`; the published repo keeps its own). Other files of the source repo that are not
    model files (its README, a LICENSE, pickled duplicates of the weights) are not carried into the
    release: nothing local can be "declared" for them, so they are listed instead of refused. A credential
    or a pasted token is still refused: it must be removed on the Hub and the new revision pinned.
    """
    trust = _trust_remote_code(manifest, artifact)
    left: list[str] = []
    for rel, real in _walk(source.directory, source.bound, found):
        if rel in RESERVED:
            continue
        name = Path(rel).name
        if rules.is_secret_name(name) or (
            real.stat().st_size <= rules.SCAN_LIMIT and rules.contains_token(name, real.read_bytes())
        ):
            found.refuse(source.shown(rel), "looks like a credential in the Hub source",
                         "delete it from the repo on the Hub and pin the new revision in source.revision")
        elif rules.is_model_file(rel, trust_remote_code=trust) and not rules.is_pickle(name):
            found.add(rel, real, rules.role_of(rel))
        else:
            left.append(rel)
    if left:
        shown = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        same_repo = artifact.source.hub == artifact.repo
        fate = "removed from the repo by the release commit" if same_repo else "not published"
        found.notes.append(f"not carried over from {source.hub} (not model files; {fate}): {shown}")


def _gather_own_repo(manifest: Manifest, artifact: Artifact, found: _Candidates) -> None:
    """The model files of a repo published from itself (source.hub == repo), without downloading its weights.

    Its weights are already in the repo at the pinned revision, so the release commit never uploads them
    (`hfrelease.publish.release.check_pinned_weights` refuses a repo whose main no longer holds them). An
    LFS file is taken from the Hub's listing (its sha256 is the LFS oid: what hashing it would give); a
    file kept in git itself is small, so it is downloaded and hashed like a local file.
    """
    from hfrelease.sources import hub_file, hub_listing

    source = artifact.source
    assert source.hub is not None and source.revision is not None
    origin = f"{source.hub}@{source.revision[:12]}"
    trust = _trust_remote_code(manifest, artifact)
    left: list[str] = []
    for entry in hub_listing(source.hub, source.revision):
        rel, name = entry.path, Path(entry.path).name
        if rel in RESERVED:
            continue
        if rules.is_secret_name(name):
            found.refuse(f"{origin}/{rel}", "looks like a credential in the Hub source",
                         "delete it from the repo on the Hub and pin the new revision in source.revision")
        elif not rules.is_model_file(rel, trust_remote_code=trust) or rules.is_pickle(name):
            left.append(rel)
        elif entry.lfs is not None:
            digest = FileHash(path=rel, size=entry.lfs.size, sha256=entry.lfs.sha256)
            found.in_repo[rel] = (digest, rules.role_of(rel))
        else:
            real = hub_file(source.hub, rel, source.revision).resolve()  # the blob the cache links to
            if not _refused_name(rel, real, found):
                found.add(rel, real, rules.role_of(rel))
    if left:
        shown = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        found.notes.append(f"not carried over from {origin} (not model files; removed from the repo by the "
                           f"release commit): {shown}")


def _declared(manifest: Manifest, artifact: Artifact, source: Path | None, found: _Candidates) -> dict[Path, str]:
    """artifact.files: real path -> repo path (relative to the checkpoint when inside it, else the name)."""
    declared: dict[Path, str] = {}
    for relative in artifact.files:
        real = manifest.resolve(relative)
        if not real.is_file():
            found.refuse(
                manifest.root / relative, "declared in files but not a file", "create it, or drop it from files"
            )
            continue
        if _refused_name(real.name, real, found):
            continue
        checkpoint = source.resolve() if source is not None else None
        inside = checkpoint is not None and real.is_relative_to(checkpoint)
        declared[real] = real.relative_to(checkpoint).as_posix() if inside and checkpoint else real.name
    return declared


def _gather_rendered(manifest: Manifest, artifact: Artifact, found: _Candidates, claimed: set[Path]) -> None:
    directory = manifest.root / artifact.id
    if not (directory / "README.md").is_file():
        found.notes.append(
            f"no rendered card at {directory / 'README.md'}: run `hfrelease render` first "
            "(bundled without README.md, CITATION.cff, plots and .eval_results)"
        )
    if not directory.is_dir():
        return
    for rel, real in _walk(directory, directory, found):
        if real in claimed or _refused_name(rel, real, found):
            continue
        first, _, rest = rel.partition("/")
        if rel in RENDERED:
            found.add(rel, real, RENDERED[rel])
        elif rest and "/" not in rest and first in RENDERED_DIRS and rest.lower().endswith(RENDERED_DIRS[first]):
            found.add(rel, real, rules.role_of(rel))
        else:
            found.refuse(
                real, "in the rendered card directory but neither rendered output nor declared",
                f'add it to files of the [[artifact]] with id = "{artifact.id}", or delete it',
            )  # fmt: skip


def _gather_ledger(manifest: Manifest, artifact: Artifact, found: _Candidates) -> None:
    results = manifest.root / "results"
    directory = results / artifact.id
    if not directory.is_dir():
        found.notes.append(f"no ledger records in {directory}: the card cites no measured results")
        return
    # Reading every record validates it (name matches content, schema ok): a damaged record never ships.
    Ledger(results).records(artifact_id=artifact.id)
    for path in sorted(directory.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue  # an interrupted atomic write leaves a hidden temp file
        if path.name.endswith((".json", ".samples.jsonl.gz")):
            found.add(LEDGER_PREFIX + path.name, path.resolve(), "ledger-record")


def _refused_name(rel: str, real: Path, found: _Candidates) -> bool:
    """Refuse credentials, pickles and cache litter by name, and files that hold a pasted token."""
    name = Path(rel).name
    if rules.is_secret_name(name):
        found.refuse(real, "looks like a credential file", "never publish secrets: move it out of the directory")
    elif rules.is_pickle(name):
        found.refuse(
            real, "pickle-based weights run code when loaded and are never published",
            "convert to safetensors (safetensors.torch.save_file) and delete the pickle",
        )  # fmt: skip
    elif rules.is_cache_file(name):
        found.refuse(real, "a cache or editor file", "delete it")
    elif real.stat().st_size <= rules.SCAN_LIMIT and rules.contains_token(name, real.read_bytes()):
        found.refuse(real, "contains what looks like an access token", "remove the token from the file")
    else:
        return False
    return True


def _walk(root: Path, bound: Path, found: _Candidates, *, plugin_tree: bool = False) -> list[tuple[str, Path]]:
    """(relative path, real path) of every file under `root`, refusing links out, VCS and cache dirs."""
    bound = bound.resolve()
    files: list[tuple[str, Path]] = []
    top = root.stat()
    stack: list[tuple[Path, str, frozenset[tuple[int, int]]]] = [(root, "", frozenset({(top.st_dev, top.st_ino)}))]
    while stack:
        directory, prefix, ancestors = stack.pop()
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            rel, shown = prefix + entry.name, Path(entry.path)
            real = shown.resolve()
            if entry.is_symlink():
                if not real.exists():
                    found.refuse(shown, "a broken symbolic link", "remove it")
                    continue
                if not real.is_relative_to(bound):
                    found.refuse(shown, f"a symbolic link to {real}, outside {bound}", "copy the file in instead")
                    continue
            if real.is_dir():
                if plugin_tree and (entry.name in rules.PLUGIN_LITTER_DIRS or entry.name.endswith(".egg-info")):
                    continue  # pip's build output in the plugin's source tree: not part of the plugin
                if entry.name in rules.VCS_DIRS:
                    found.refuse(shown, "a version-control directory", "move the checkpoint out of the working copy")
                    continue
                if entry.name in rules.CACHE_DIRS:
                    found.refuse(shown, "a cache directory", f"delete it (rm -r {shown})")
                    continue
                stat = real.stat()
                if (stat.st_dev, stat.st_ino) not in ancestors:
                    stack.append((shown, rel + "/", ancestors | {(stat.st_dev, stat.st_ino)}))
            elif real.is_file():
                if plugin_tree and rules.is_cache_file(entry.name):
                    continue
                files.append((rel, real))
    return sorted(files)


def _hash_threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(HASH_THREADS, cores))


def _hash_all(gathered: Sequence[_Candidates], cache: HashCache | None) -> dict[Path, FileHash]:
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
    manifest: Manifest, artifact: Artifact, found: _Candidates, digests: dict[Path, FileHash],
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
    # The same format as hfrelease.ledger.hashing.hash_artifact, so MANIFEST names the hash cards cite.
    lines = "".join(f"{f.sha256}  {f.path}\n" for f in weights)
    content_hash = hashlib.sha256(lines.encode()).hexdigest()
    header = [
        f"family: {manifest.family.name} {manifest.family.version} (tag {manifest.tag_name()})",
        f"artifact: {artifact.id} -> {artifact.repo}",
        f"weights sha256: {content_hash}",
    ]
    content = render_manifest((ManifestEntry(path=f.path, size=f.size, sha256=f.sha256) for f in files), header=header)
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
