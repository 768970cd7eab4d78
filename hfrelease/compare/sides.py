"""One side of a comparison: a family's ledger read from a directory, a git ref or a release tag on the Hub.

Whatever the source, its files are copied into a fresh directory first, and only files that could belong
to a ledger: regular files (a link, a FIFO or a device is refused before anything reads it), at most
`MAX_FILE_BYTES` each, named like ledger files, one directory level per artifact. The copy is then read
by `Ledger`, which checks every record against its name and every samples file against its record, so
a side that is not a sound ledger is refused instead of compared.

How a side is named (`OLD` / `NEW` of `hfrelease compare`): `git:REF` is the family's ledger at a git
ref of the repository holding the manifest; an existing directory is a ledger directory (`results/`);
anything else (or `hub:TAG`) is a release tag, read from the published repos of the manifest's
artifacts, whose `ledger/` folder holds that artifact's records (see `hfrelease.bundle.gather`); `previous`
is the family's newest release tag on the Hub but the manifest's own (`hfrelease.compare.previous`), and the
side is labelled with that tag.
"""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from hfrelease.compare.previous import PREVIOUS, previous_release, tag_names
from hfrelease.errors import HubError, LedgerError, UsageError
from hfrelease.ledger.record import RAW_KEYS, raw_files

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hfrelease.ledger.record import LedgerRecord
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import Manifest

# A ledger's records are small; samples files of big runs are gzip'd. Anything larger is not a ledger
# file and must not fill the disk of the machine comparing.
MAX_FILE_BYTES = 64 * 1024 * 1024
# Records, samples files and every raw file type a record can name (`RAW_KEYS`).
_LEDGER_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.(json|samples\.jsonl\.gz|"
                          + "|".join(re.escape(kind) for kind in RAW_KEYS.values()) + ")$")
_ARTIFACT_DIR = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_LEDGER_HINT = ("A side is a ledger directory (model_cards/<family>/results), git:REF (a commit, branch or tag "
                "of the family's repository) or a release tag published on the Hub.")


@dataclass(frozen=True, kw_only=True)
class LedgerSide:
    """A side read into `root` (a checked copy): its label, where it came from and the family of its records."""

    label: str
    source: Literal["directory", "git", "hub"]
    root: Path
    family: str
    records: tuple[LedgerRecord, ...]


def read_side(
    spec: str,
    *,
    work: Path,
    manifest: Manifest | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> LedgerSide:
    """Read the side `spec` names into `work` (an empty directory of the caller's) and check it."""
    if spec.startswith("git:"):
        if manifest is None:
            raise UsageError(f"{spec}: a git ref is read from the repository holding the family's manifest, "
                             "and no manifest was found", hint="Pass --manifest model_cards/<family>/release.toml.")
        _from_git(spec.removeprefix("git:"), manifest.root, work)
        return _checked(spec, "git", work)
    if not spec.startswith("hub:") and Path(spec).is_dir():
        _copy_tree(Path(spec), work, label=spec)
        return _checked(spec, "directory", work)
    tag = spec.removeprefix("hub:")
    if manifest is None:
        raise UsageError(f"{spec}: not a directory, and a release tag is read from the repos a manifest names; "
                         "no manifest was found", hint=_LEDGER_HINT)
    found = _from_hub(tag, manifest, work, endpoint=endpoint, token=token)
    # `previous` is named by the tag it stands for: a card says "Changes since v0.1" and cites `v0.1:<record>`.
    return _checked(found if tag == PREVIOUS else spec, "hub", work)


def _checked(label: str, source: Literal["directory", "git", "hub"], root: Path) -> LedgerSide:
    from hfrelease.ledger.store import Ledger

    ledger = Ledger(root)
    records = ledger.records()
    if not records:
        raise UsageError(f"{label}: not a ledger (no ledger record in it)", hint=_LEDGER_HINT)
    for record in records:
        ledger.load_samples(record)  # a samples file that is not its record's is refused here, not compared
    _check_raw(label, ledger, records)
    families = sorted({r.family for r in records})
    if len(families) > 1:
        raise UsageError(f"{label}: records of several families ({', '.join(families)}) in one ledger",
                         hint="Compare one family's ledger (model_cards/<family>/results) at a time.")
    return LedgerSide(label=label, source=source, root=root, family=families[0], records=tuple(records))


def _check_raw(label: str, ledger: Ledger, records: Sequence[LedgerRecord]) -> None:
    """Refuse a side any of whose records' raw files (a speed point's `*.bench.jsonl` repeats, its counters,
    a fidelity gate's responses) is missing or does not match the sha256 in its name, naming every one: its
    intervals are drawn from those files, and a figure whose evidence is gone or edited is not judged."""
    bad: list[str] = []
    for record in records:
        for _, name in raw_files(record):
            path = ledger.root / record.artifact_id / name
            if not path.is_file():
                bad.append(f"{record.artifact_id}/{name} (missing)")
                continue
            try:
                ledger.raw_bytes(record, name)
            except LedgerError:
                bad.append(f"{record.artifact_id}/{name} (does not match the sha256 in its name)")
    if bad:
        raise LedgerError(f"{label}: {len(bad)} raw file{'s' if len(bad) != 1 else ''} its records name cannot be "
                          f"trusted, so nothing of it is compared: {', '.join(bad)}",
                          hint="Restore the ledger's raw files from where it was recorded (git, the release's "
                               "ledger/ folder), or re-measure those points.")


def _accept(relative: PurePosixPath, size: int, *, label: str) -> bool:
    """Whether a file at `relative` (artifact/name) is copied; raise on one that no ledger could hold."""
    parts = relative.parts
    if any(p.startswith(".") for p in parts):
        return False  # an interrupted atomic write leaves a hidden temp file
    if len(parts) != 2 or not _ARTIFACT_DIR.match(parts[0]) or not _LEDGER_FILE.match(parts[1]):
        return False
    if size > MAX_FILE_BYTES:
        raise UsageError(f"{label}: {relative} is {size} bytes, more than a ledger file holds "
                         f"({MAX_FILE_BYTES} at most)", hint=_LEDGER_HINT)
    return True


def _copy_tree(source: Path, work: Path, *, label: str) -> None:
    """Copy a ledger directory's files, refusing links and special files before reading them."""
    refused: list[str] = []
    for artifact in sorted(source.iterdir()):
        if artifact.name.startswith("."):
            continue
        if artifact.is_symlink() or not artifact.is_dir():
            if artifact.is_symlink() or not artifact.is_file():
                refused.append(f"{artifact.name} (a link or special file)")
            continue
        for path in sorted(artifact.iterdir()):
            relative = PurePosixPath(artifact.name, path.name)
            info = path.lstat()
            if path.name.startswith("."):
                continue
            if not stat.S_ISREG(info.st_mode):
                if not stat.S_ISDIR(info.st_mode) or path.is_symlink():
                    refused.append(f"{relative} (a link or special file)")
                continue
            if _accept(relative, info.st_size, label=label):
                _write(work / relative, _read_regular(path, label=label))
    if refused:
        raise UsageError(f"{label}: not read, because a ledger holds only regular files: {', '.join(refused)}",
                         hint="Compare a copy of the ledger without them.")


def _read_regular(path: Path, *, label: str) -> bytes:
    # O_NOFOLLOW | O_NONBLOCK: a file swapped for a link or a FIFO after the listing is refused, not followed
    # or waited on.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UsageError(f"{label}: cannot read {path}: {exc.strerror}", hint=_LEDGER_HINT) from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            raise UsageError(f"{label}: {path} is not a regular ledger file", hint=_LEDGER_HINT)
        return handle.read(MAX_FILE_BYTES + 1)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False, timeout=120)


def _from_git(ref: str, family_root: Path, work: Path) -> None:
    """The family's `results/` at `ref`, through `git archive` (no checkout: the work tree is left alone)."""
    label = f"git:{ref}"
    # A ref starting with "-" would be read by git as an option.
    if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 32 for c in ref):
        raise UsageError(f"{label}: not a git ref", hint=_LEDGER_HINT)
    prefix = _git(family_root, "rev-parse", "--show-prefix")
    if prefix.returncode != 0:
        raise UsageError(f"{label}: {family_root} is not in a git repository",
                         hint="Read a git ref from the repository holding the family's manifest.")
    commit = _git(family_root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit.returncode != 0:
        raise UsageError(f"{label}: no such commit, branch or tag in the repository of {family_root}",
                         hint="`git log --oneline` and `git tag` list what can be compared.")
    results = prefix.stdout.decode().strip() + "results"
    # Run from the top: git reads the path relative to -C's directory, and `git archive` takes no `:(top)`.
    top = _git(family_root, "rev-parse", "--show-toplevel").stdout.decode().strip()
    archive = _git(Path(top), "archive", "--format=tar", commit.stdout.decode().strip(), "--", results)
    if archive.returncode != 0:
        raise UsageError(f"{label}: not a ledger (no {results} at that commit)", hint=_LEDGER_HINT)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        for member in tar.getmembers():
            # Only regular files are written, by their path below results/; nothing is extracted by tarfile,
            # so a member's own path, link target or mode never reaches the disk.
            if not member.isreg():
                continue
            relative = PurePosixPath(member.name).relative_to(results)
            if _accept(relative, member.size, label=label):
                handle = tar.extractfile(member)
                if handle is not None:
                    _write(work / relative, handle.read())


def _hub_relative(artifact_id: str, name: str, ids: set[str]) -> PurePosixPath | None:
    """Where a repo's `ledger/` file goes in the side's ledger: its own records (`ledger/<name>`) under its
    artifact, another artifact's records its card cites (`ledger/<id>/<name>`, the reference's of a family that
    does not publish it) under that artifact; anything else is not a ledger file."""
    parts = PurePosixPath(name.removeprefix("ledger/")).parts
    if len(parts) == 1:
        return PurePosixPath(artifact_id, parts[0])
    if len(parts) == 2 and parts[0] in ids:
        return PurePosixPath(*parts)
    return None


def _from_hub(tag: str, manifest: Manifest, work: Path, *, endpoint: str | None, token: str | None) -> str:
    """Each published artifact's `ledger/` at `tag` (`previous`: the tag it stands for), as `<artifact id>/<name>`;
    return the tag read.

    A repo without the tag is skipped when another has it: an artifact added since that release (the demo's
    v0.0 released only its draft and the draft's target) has no rows on that side, and its rows are listed
    as one-sided. When no repo has it, the tag is unknown, and the error names the tags the repos have."""
    import tempfile

    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    from hfrelease.files.sources import hub_access, hub_endpoint
    from hfrelease.hub_errors import hub_errors

    label = f"hub:{tag}"
    url = endpoint or hub_endpoint()
    api = HfApi(endpoint=url, token=token)
    published = [a for a in manifest.artifact if a.publish]
    ids = {a.id for a in manifest.artifact}
    found = False
    missing: list[str] = []
    with hub_access(url), tempfile.TemporaryDirectory(prefix="hfrelease-compare-") as download:
        if tag == PREVIOUS:
            tag = previous_release(manifest, api)
            label = f"hub:{tag}"
        for artifact in published:
            try:
                with hub_errors(f"reading {artifact.repo} @ {tag}"):
                    names = [n for n in api.list_repo_files(artifact.repo, revision=tag) if n.startswith("ledger/")]
                    for name in names:
                        relative = _hub_relative(artifact.id, name, ids)
                        if relative is None or not _accept(relative, 0, label=label) or (work / relative).exists():
                            continue  # a cited record of another artifact ships in each repo citing it: read once
                        path = Path(api.hf_hub_download(artifact.repo, name, revision=tag,
                                                        local_dir=Path(download) / artifact.id))
                        if path.stat().st_size > MAX_FILE_BYTES:
                            _accept(relative, path.stat().st_size, label=label)
                        _write(work / relative, _read_regular(path, label=label))
                        found = True
            except HubError as error:
                # Missing: 404, or 401 RepoNotFound to a caller without a token (as the render job reads): the
                # Hub answers so for a repo that does not exist yet (an artifact this release adds) or is private.
                # A refused token or a failing Hub is exit 7, not a wrong tag.
                if error.status != 404 and not isinstance(error.__cause__, RepositoryNotFoundError):
                    raise
                missing.append(artifact.repo)
        if published and len(missing) == len(published):  # listing the tags there reads the Hub too
            raise UsageError(f"{label}: no release tag {tag!r} in any published repo of the family at {url} "
                             f"({', '.join(missing)}); the release tags there, newest first: "
                             f"{', '.join(tag_names(api, missing)) or 'none'}",
                             hint="`hfrelease compare` reads a published release tag (the manifest's "
                                  "[publish].tag, e.g. v0.1) from the published repos of the family.")
    if not found:
        raise UsageError(f"{label}: not a ledger (no ledger/ records in the family's repos at {tag})",
                         hint=_LEDGER_HINT)
    return tag
