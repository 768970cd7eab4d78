"""Gathering: every candidate file of an artifact's repo, each judged by the one allowlist (`allowlist.admit`).

Where files come from is described in `plan.py`. This module walks those places, decides each file's repo
path and role, and collects every refusal (with its place: `artifact[1].files[0]`, `results/q0/...`) instead
of stopping at the first, so that `hfrelease check` and `hfrelease bundle` report the same problems, once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hfrelease.bundle.candidates import RESERVED, Candidates
from hfrelease.bundle.ledger_files import gather_ledger
from hfrelease.files import rules
from hfrelease.files.allowlist import Kind, Problem, Tree, admit
from hfrelease.files.hashing import FileHash
from hfrelease.manifest import Artifact, Manifest

RENDERED = {"README.md": "card", "CITATION.cff": "citation", "citation.bib": "citation"}
RENDERED_DIRS = {"plots": (".png", ".svg", ".jpg", ".jpeg", ".webp"), ".eval_results": (".yaml", ".yml"),
                 "every_eval_ever": (".json", "_samples.jsonl")}
# Rendered folders whose files nest: Every Eval Ever's datastore layout, data/{gate}/{owner}/{model}/.
NESTED_DIRS = {"every_eval_ever"}
PLUGIN_PREFIX = "vllm_plugin/"
SourceFetcher = Callable[[str, str], Path]  # (repo id, revision) -> local snapshot directory


@dataclass(frozen=True, kw_only=True)
class Source:
    """The artifact's checkpoint: its directory and its Hub origin (where its links may point is `Candidates.tree`).

    `hub` is "owner/name@<revision>" for a Hub source, whose directory is a snapshot in the Hugging Face
    cache: messages then name the file by its place in the Hub repo, never by the cache path (which a user
    cannot declare or edit).
    """

    directory: Path
    hub: str | None = None

    def shown(self, rel: str) -> str:
        return f"{self.hub}/{rel}" if self.hub else str(self.directory / rel)


def candidates_for(manifest: Manifest, artifact: Artifact) -> Candidates:
    index = next(i for i, a in enumerate(manifest.artifact) if a.id == artifact.id)
    return Candidates(artifact=artifact.id, index=index, tree=Tree.of(manifest.root))


def source_dir(
    manifest: Manifest, artifact: Artifact, found: Candidates, fetcher: SourceFetcher | None, *, hub: bool = True
) -> Source | None:
    """The artifact's checkpoint, downloading a Hub source (once, into the Hugging Face cache) if need be.

    With `hub=False` (`hfrelease check`) a Hub source is not asked for: None.
    """
    source = artifact.source
    where = f"artifact[{found.index}].source"
    if source.path is not None:
        directory = manifest.resolve(source.path)
        if not directory.is_dir():
            found.refuse(directory, "the artifact's source directory does not exist", "build or fix source.path",
                         where=f"{where}.path")  # fmt: skip
            return None
        found.tree = Tree.of(manifest.root, directory)
        return Source(directory=directory)
    if not hub or source.hub is None or source.revision is None:  # the validator guarantees one or the other
        return None
    if source.hub == artifact.repo and fetcher is None:
        _gather_own_repo(manifest, artifact, found)
        return None
    from hfrelease.files.sources import cache_repo_dir, download_snapshot

    snapshot = (fetcher or download_snapshot)(source.hub, source.revision)
    # A cache snapshot's files link to ../../blobs/: the repo folder of the cache bounds them.
    bound = cache_repo_dir(snapshot) or snapshot.resolve().parent.parent
    found.tree = Tree.of(manifest.root, bound)
    return Source(directory=snapshot, hub=f"{source.hub}@{source.revision[:12]}")


def trust_remote_code(manifest: Manifest, artifact: Artifact) -> bool:
    own = artifact.serve.trust_remote_code if artifact.serve else None
    return bool(own if own is not None else manifest.serve.trust_remote_code)


def _plugin(manifest: Manifest, artifact: Artifact, index: int) -> tuple[Path, str] | None:
    own = artifact.serve.plugin if artifact.serve else None
    relative = own or manifest.serve.plugin
    if not relative:
        return None
    # Not resolved here: a plugin directory that is a link out of the tree is named as the manifest names it.
    return manifest.root / relative, (f"artifact[{index}].serve.plugin" if own else "serve.plugin")


def gather(manifest: Manifest, artifact: Artifact, source: Source | None, found: Candidates) -> Path | None:
    """Collect every candidate file of `artifact` into `found`; return its plugin directory, if any."""
    declared = declared_files(manifest, artifact, source.directory if source else None, found)
    # Declared files already judged (accepted or refused) are not judged again by the directory walks.
    claimed = {manifest.resolve(relative) for relative in artifact.files}
    if source is not None and source.hub is not None:
        _gather_hub(manifest, artifact, source, found)
    elif source is not None:
        _gather_checkpoint(manifest, artifact, source.directory, found, claimed)
    _gather_rendered(manifest, artifact, found, claimed)
    for real_path, (repo_path, where) in declared.items():
        found.add(repo_path, real_path, rules.role_of(repo_path), where=where)
    gather_ledger(manifest, artifact, found)
    _gather_prompts(manifest, found)
    plugin = _plugin(manifest, artifact, found.index)
    if plugin is None:
        return None
    directory, where = plugin
    problem = found.tree.outside(directory)
    if problem is not None:
        found.refuse(directory, f"the serve plugin directory {problem.reason}", problem.fix, where=where)
        return None
    if not directory.is_dir():
        found.refuse(directory, "the serve plugin directory does not exist", "fix [serve].plugin", where=where)
        return None
    for rel, path in _walk(directory, found, where=where, plugin_tree=True):
        real = found.judge(path, kind=Kind.PLUGIN, name=rel, where=where)
        if real is not None:
            found.add(PLUGIN_PREFIX + rel, real, "plugin", where=where)
    return directory.resolve()


def declared_files(
    manifest: Manifest, artifact: Artifact, source: Path | None, found: Candidates
) -> dict[Path, tuple[str, str]]:
    """artifact.files: real path -> (repo path, location); the repo path is relative to the checkpoint when
    the file is inside it, else its name."""
    declared: dict[Path, tuple[str, str]] = {}
    checkpoint = source.resolve() if source is not None else None
    for position, relative in enumerate(artifact.files):
        where = f"artifact[{found.index}].files[{position}]"
        path = manifest.root / relative  # an absolute `relative` replaces the root: the allowlist refuses it
        real = found.judge(path, kind=Kind.DECLARED, name=Path(relative).name, where=where)
        if real is None:
            continue
        declared[real] = (rules.declared_repo_path(relative, real, checkpoint), where)
    return declared


def _gather_checkpoint(
    manifest: Manifest, artifact: Artifact, directory: Path, found: Candidates, claimed: set[Path]
) -> None:
    where = f"artifact[{found.index}].source.path"
    trust = trust_remote_code(manifest, artifact)
    for rel, path in _walk(directory, found, where=where):
        if path.resolve() in claimed:
            continue
        if not rules.is_model_file(rel, trust_remote_code=trust):
            problem = admit(path, tree=found.tree, kind=Kind.DECLARED, name=rel)
            if isinstance(problem, Problem):  # the more serious refusal (a credential, a pickle) comes first
                found.refuse(path, problem.reason, problem.fix, where=where)
                continue
            root_rel = os.path.relpath(directory / rel, manifest.root)
            found.refuse(
                directory / rel, "not a model file and not declared",
                f'add "{Path(root_rel).as_posix()}" to files of the [[artifact]] with id = "{artifact.id}" in '
                "release.toml, or delete it", where=where,
            )  # fmt: skip
            continue
        real = found.judge(path, kind=Kind.MODEL, name=rel, where=where)
        if real is not None:
            found.add(rel, real, rules.role_of(rel), where=where)
            claimed.add(real)


def _gather_hub(manifest: Manifest, artifact: Artifact, source: Source, found: Candidates) -> None:
    """The model files of a Hub snapshot; what else the Hub repo holds is named in a note, never refused.

    A Hub repo always holds a `.gitattributes` (its LFS rules): it belongs to the repo and is never part of
    a bundle (`RESERVED`; the published repo keeps its own). Other files of the source repo that are not
    model files (its README, a LICENSE, pickled duplicates of the weights) are not carried into the
    release: nothing local can be "declared" for them, so they are listed instead of refused. A credential
    is still refused: it must be removed on the Hub and the new revision pinned.
    """
    where = f"artifact[{found.index}].source.hub"
    trust = trust_remote_code(manifest, artifact)
    left: list[str] = []
    fix = "delete it from the repo on the Hub and pin the new revision in source.revision"
    for rel, path in _walk(source.directory, found, where=where):
        if rel in RESERVED:
            continue
        name = Path(rel).name
        if rules.is_secret_name(name):
            found.refuse(source.shown(rel), "looks like a credential in the Hub source", fix, where=where)
        elif rules.is_model_file(rel, trust_remote_code=trust) and not rules.is_pickle(name):
            verdict = admit(path, tree=found.tree, kind=Kind.MODEL, name=rel)
            if isinstance(verdict, Problem):
                found.refuse(source.shown(rel), f"{verdict.reason} (in the Hub source)", fix, where=where)
            else:
                found.add(rel, verdict, rules.role_of(rel), where=where)
        else:
            left.append(rel)
    if left:
        shown = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        same_repo = artifact.source.hub == artifact.repo
        fate = "removed from the repo by the release commit" if same_repo else "not published"
        found.notes.append(f"not carried over from {source.hub} (not model files; {fate}): {shown}")


def _gather_own_repo(manifest: Manifest, artifact: Artifact, found: Candidates) -> None:
    """The model files of a repo published from itself (source.hub == repo), without downloading its weights.

    Its weights are already in the repo at the pinned revision, so the release commit never uploads them
    (`hfrelease.publish.release.check_pinned_weights` refuses a repo whose main no longer holds them). An
    LFS file is taken from the Hub's listing (its sha256 is the LFS oid: what hashing it would give); a
    file kept in git itself is small, so it is downloaded and judged like a local file.
    """
    from hfrelease.files.sources import cache_repo_dir, hub_file, hub_listing

    source = artifact.source
    assert source.hub is not None and source.revision is not None
    origin = f"{source.hub}@{source.revision[:12]}"
    where = f"artifact[{found.index}].source.hub"
    fix = "delete it from the repo on the Hub and pin the new revision in source.revision"
    trust = trust_remote_code(manifest, artifact)
    left: list[str] = []
    for entry in hub_listing(source.hub, source.revision):
        rel, name = entry.path, Path(entry.path).name
        if rel in RESERVED:
            continue
        if rules.is_secret_name(name):
            found.refuse(f"{origin}/{rel}", "looks like a credential in the Hub source", fix, where=where)
        elif not rules.is_model_file(rel, trust_remote_code=trust) or rules.is_pickle(name):
            left.append(rel)
        elif entry.lfs is not None:
            digest = FileHash(path=rel, size=entry.lfs.size, sha256=entry.lfs.sha256)
            found.in_repo[rel] = (digest, rules.role_of(rel))
        else:
            path = hub_file(source.hub, rel, source.revision)
            snapshot = path.parents[len(Path(rel).parts) - 1]
            tree = Tree.of(cache_repo_dir(snapshot) or snapshot)  # the cache's links point into its blobs/
            verdict = admit(path, tree=tree, kind=Kind.MODEL, name=rel)
            if isinstance(verdict, Problem):
                found.refuse(f"{origin}/{rel}", f"{verdict.reason} (in the Hub source)", fix, where=where)
            else:
                found.add(rel, verdict, rules.role_of(rel), where=where)
    if left:
        shown = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        found.notes.append(f"not carried over from {origin} (not model files; removed from the repo by the "
                           f"release commit): {shown}")


def _gather_rendered(manifest: Manifest, artifact: Artifact, found: Candidates, claimed: set[Path]) -> None:
    directory = manifest.root / artifact.id
    where = f"{artifact.id}/"
    if not (directory / "README.md").is_file():
        found.notes.append(
            f"no rendered card at {directory / 'README.md'}: run `hfrelease render` first "
            "(bundled without README.md, CITATION.cff, plots and .eval_results)"
        )
    if not directory.is_dir() and not directory.is_symlink():
        return
    problem = found.tree.outside(directory)
    if problem is not None:
        found.refuse(directory, problem.reason, problem.fix, where=where)
        return
    for rel, path in _walk(directory, found, where=where):
        if path.resolve() in claimed:
            continue
        first, _, rest = rel.partition("/")
        rendered = rel in RENDERED or (
            rest and ("/" not in rest or first in NESTED_DIRS) and first in RENDERED_DIRS
            and rest.lower().endswith(RENDERED_DIRS[first])
        )
        if not rendered:
            verdict = admit(path, tree=found.tree, kind=Kind.DECLARED, name=rel)
            if isinstance(verdict, Problem):
                found.refuse(path, verdict.reason, verdict.fix, where=where + rel)
                continue
            found.refuse(
                path, "in the rendered card directory but neither rendered output nor declared",
                f'add it to files of the [[artifact]] with id = "{artifact.id}", or delete it', where=where + rel,
            )  # fmt: skip
            continue
        real = found.judge(path, kind=Kind.RENDERED, name=rel, where=where + rel)
        if real is not None:
            found.add(rel, real, RENDERED.get(rel) or rules.role_of(rel), where=where + rel)


def _gather_prompts(manifest: Manifest, found: Candidates) -> None:
    """The prompt files the speed figures and the fidelity gate used, as prompts/<name>, and the files a custom
    gate's command names (its program as gates/<name>) (issue 25, part 6): the card names them by that path,
    so a reader re-runs a figure with the very prompts it was measured on.

    A custom gate's file outside the family directory (the demo's JSON gate reads
    `../../build/demo/gates/demo_json.jsonl`) is not shipped, as no link out of the family is followed, and
    said in a note rather than refused: such gates were valid before their files shipped, and their records
    are keyed by the command that names the file (moving it into the family means measuring again).
    """
    for repo_path, (path, where) in rules.shipped_prompts(manifest).items():
        if ".command[" in where and path.exists() and found.tree.outside(path) is not None:
            found.notes.append(f"{where}: {path} is outside the family directory, so {repo_path}, which the cards' "
                               "re-run command names, is not shipped: copy the file into the family directory and "
                               "name it there")
            continue
        real = found.judge(path, kind=Kind.DECLARED, name=repo_path.rsplit("/", 1)[1], where=where)
        if real is not None:
            found.add(repo_path, real, rules.role_of(repo_path), where=where)


def _walk(root: Path, found: Candidates, *, where: str, plugin_tree: bool = False) -> list[tuple[str, Path]]:
    """(relative path, path under `root`) of every file below it, not descending into a directory out of the
    tree, version control or caches. Files are returned unjudged: callers judge each with the allowlist."""
    files: list[tuple[str, Path]] = []
    top = root.stat()
    stack: list[tuple[Path, str, frozenset[tuple[int, int]]]] = [(root, "", frozenset({(top.st_dev, top.st_ino)}))]
    while stack:
        directory, prefix, ancestors = stack.pop()
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            rel, path = prefix + entry.name, Path(entry.path)
            try:
                is_dir = entry.is_dir()  # follows a link: a link to a directory is walked if it stays inside
            except OSError:
                is_dir = False
            if not is_dir:
                if not (plugin_tree and rules.is_cache_file(entry.name)):
                    files.append((rel, path))
                continue
            if plugin_tree and (entry.name in rules.PLUGIN_LITTER_DIRS or entry.name.endswith(".egg-info")):
                continue  # pip's build output in the plugin's source tree: not part of the plugin
            if entry.name in rules.VCS_DIRS:
                found.refuse(path, "a version-control directory", "move the checkpoint out of the working copy",
                             where=where)  # fmt: skip
                continue
            if entry.name in rules.CACHE_DIRS:
                found.refuse(path, "a cache directory", f"delete it (rm -r {path})", where=where)
                continue
            problem = found.tree.outside(path)
            if problem is not None:
                found.refuse(path, f"a link to a directory that {problem.reason}", problem.fix, where=where)
                continue
            info = path.stat()
            if (info.st_dev, info.st_ino) not in ancestors:
                stack.append((path, rel + "/", ancestors | {(info.st_dev, info.st_ino)}))
    return sorted(files)
