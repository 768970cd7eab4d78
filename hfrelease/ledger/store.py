"""A family's ledger directory (`model_cards/<family>/results/`): write, read, find and merge records.

Every record is one file, content-addressed:

    <artifact_id>/<kind>-<subject_id>-<input_key[:12]>-<sha256(file bytes)[:12]>.json

so records written on two machines (GitHub Actions matrix jobs, a workstation and a cluster) never
collide, identical records are identical files, and merging ledgers is copying files that are not there
yet. Nothing is ever overwritten. Per-sample outcomes of big runs (over `SPILL_BYTES` of JSON) go to a
sibling `<kind>-<subject_id>-<input_key[:12]>-<sha256(jsonl)[:12]>.samples.jsonl.gz`, whose name and
uncompressed sha256 the record keeps, so cards and git diffs stay small and the samples stay verifiable.
A speed record names its raw benchmark output (`extra["raw"]`, `extra["metrics_raw"]`): sibling
`speed-<workload>-<input_key[:12]>-<sha256(bytes)[:12]>.bench.jsonl` / `.metrics.txt` files, which
merging copies with the record and verifies against the hash in their names.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hfrelease.errors import LedgerError, UsageError
from hfrelease.files.allowlist import SAMPLES_LIMIT
from hfrelease.files.atomic import write_atomic
from hfrelease.ledger.record import RAW_FILE, RAW_KEYS, Kind, LedgerRecord, Sample, check_samples, raw_files

SPILL_BYTES = 256 * 1024
_REPAIR_HINT = "Restore the file from git, or delete it: the measurement is then re-run."


@dataclass(frozen=True, kw_only=True)
class SkippedFile:
    path: Path
    reason: str


@dataclass(frozen=True, kw_only=True)
class MergeReport:
    """What `Ledger.merge` did: ledger paths added or already present, and source files it refused."""

    added: tuple[Path, ...]
    identical: tuple[Path, ...]
    skipped_invalid: tuple[SkippedFile, ...]

    def as_dict(self) -> dict[str, Any]:
        """`hfrelease ledger merge --json`."""
        return {"added": [str(p) for p in self.added], "identical": [str(p) for p in self.identical],
                "skipped_invalid": [{"path": str(s.path), "reason": s.reason} for s in self.skipped_invalid]}


def record_name(record: LedgerRecord, content: bytes) -> str:
    """The record's path relative to the ledger root, given its file bytes."""
    digest = hashlib.sha256(content).hexdigest()
    return f"{record.artifact_id}/{record.kind}-{record.subject_id}-{record.input_key[:12]}-{digest[:12]}.json"


def _samples_jsonl(samples: Iterable[Sample]) -> bytes:
    lines = (
        json.dumps(s.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        for s in samples
    )
    return "".join(lines).encode()


class Ledger:
    """The records of one family, under `root` (= `model_cards/<family>/results/`)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, record: LedgerRecord) -> Path:
        """Write `record` atomically under its content-addressed name and return the path.

        Writing a record that is already there is a no-op: the name is derived from the bytes.
        """
        if record.samples:
            jsonl = _samples_jsonl(record.samples)
            if len(jsonl) > SPILL_BYTES:
                sha = hashlib.sha256(jsonl).hexdigest()
                name = f"{record.kind}-{record.subject_id}-{record.input_key[:12]}-{sha[:12]}.samples.jsonl.gz"
                target = self.root / record.artifact_id / name
                if not target.exists():
                    # mtime=0 keeps gzip's header free of the time, so equal samples give equal bytes here.
                    write_atomic(target, gzip.compress(jsonl, mtime=0))
                # The samples file lands before the record: a record never points at a missing file.
                record = record.model_copy(update={"samples": (), "samples_file": name, "samples_sha256": sha})
        content = record.to_json()
        path = self.root / record_name(record, content)
        if path.exists():
            if path.read_bytes() != content:
                raise LedgerError(f"{path}: differs from the record its name says it holds", hint=_REPAIR_HINT)
            return path
        write_atomic(path, content)
        return path

    def records(
        self, *, artifact_id: str | None = None, subject_id: str | None = None, kind: Kind | None = None
    ) -> list[LedgerRecord]:
        """Every record matching the filters, oldest first; a damaged record file is a `LedgerError`."""
        found: list[tuple[LedgerRecord, Path]] = []
        # The glob only narrows the files read: `speed-*` also matches `speed-best-*`, so the kind is
        # checked on the record itself.
        for path in self.root.glob(f"{artifact_id or '*'}/{kind or '*'}-*.json"):
            record = self._load(path)
            if (subject_id is None or record.subject_id == subject_id) and (kind is None or record.kind == kind):
                found.append((record, path))
        found.sort(key=lambda item: (_when(item[0]), item[1].name))
        return [record for record, _ in found]

    def latest(self, input_key: str) -> LedgerRecord | None:
        """The newest "ok" record measured with exactly these inputs, or None: then it must be measured."""
        candidates: list[tuple[LedgerRecord, Path]] = []
        # The key's prefix is in the file name: only those files are read.
        for path in self.root.glob(f"*/*-{input_key[:12]}-*.json"):
            record = self._load(path)
            if record.input_key == input_key and record.status == "ok":
                candidates.append((record, path))
        if not candidates:
            return None
        return max(candidates, key=lambda item: (_when(item[0]), item[1].name))[0]

    def raw_path(self, record: LedgerRecord, name: str) -> Path:
        """Where a raw file named by `record` (`extra` keys raw, metrics_raw, fidelity_raw) lives."""
        if name not in {n for _, n in raw_files(record)}:
            raise LedgerError(f"{name!r} is not a raw file of record {record.subject_id!r} of {record.artifact_id!r}")
        return self.root / record.artifact_id / name

    def raw_bytes(self, record: LedgerRecord, name: str) -> bytes:
        """The bytes of a raw file `record` names, checked against the sha256 in the file's name."""
        path = self.raw_path(record, name)
        match = RAW_FILE.fullmatch(name)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise LedgerError(f"{path}: {exc}", hint=_REPAIR_HINT) from exc
        if match is None or hashlib.sha256(data).hexdigest()[:12] != match["sha"]:
            raise LedgerError(f"{path} does not match the sha256 in its name", hint=_REPAIR_HINT)
        return data

    def load_samples(self, record: LedgerRecord) -> tuple[Sample, ...]:
        """The record's per-sample outcomes, inline or from its samples file (whose sha256 is verified)."""
        if record.samples_file is None:
            return record.samples
        path = self.root / record.artifact_id / record.samples_file
        try:
            return _read_samples(path, record)
        except (OSError, ValueError, EOFError, zlib.error) as exc:
            raise LedgerError(f"{path}: {exc}", hint=_REPAIR_HINT) from exc

    def merge(self, sources: Iterable[Path]) -> MergeReport:
        """Copy into this ledger every valid record of the `sources` ledger directories that it lacks.

        Records are content-addressed, so nothing conflicts and nothing is overwritten; a source file that
        is not a valid record (or whose samples file or raw benchmark files are missing or damaged) is
        reported and not copied. A record's files land before the record, so a record never points at a
        missing file; they are also copied when the record itself is already here but they are not.
        """
        added: list[Path] = []
        identical: list[Path] = []
        skipped: list[SkippedFile] = []
        for given in sources:
            source, paths = _source_records(given)
            for path in paths:
                try:
                    record = Ledger(source)._load(path)
                    samples_file = self._merge_samples(source, record)
                    files = self._merge_raw(source, record)
                except LedgerError as exc:
                    skipped.append(SkippedFile(path=path, reason=exc.message))
                    continue
                target = self.root / path.relative_to(source)
                content = path.read_bytes()
                if target.exists() and target.read_bytes() != content:
                    skipped.append(SkippedFile(path=path, reason=f"differs from {target}, which was kept"))
                    continue
                if samples_file is not None:
                    files.append(samples_file)
                for file_target, data in files:
                    write_atomic(file_target, data)
                if target.exists():
                    identical.append(target)
                    continue
                write_atomic(target, content)
                added.append(target)
        return MergeReport(added=tuple(added), identical=tuple(identical), skipped_invalid=tuple(skipped))

    def _merge_raw(self, source: Path, record: LedgerRecord) -> list[tuple[Path, bytes]]:
        """Verify a source speed record's raw benchmark files; (target, bytes) of those this ledger lacks."""
        missing: list[tuple[Path, bytes]] = []
        for key, name in raw_files(record):
            match = RAW_FILE.fullmatch(name)
            if match is None or match["type"] != RAW_KEYS[key]:
                raise LedgerError(f"extra.{key} names {name!r}, which is not a content-addressed "
                                  f"`<stem>-<sha256[:12]>.{RAW_KEYS[key]}` file name")
            path = source / record.artifact_id / name
            if path.is_symlink() or not path.is_file():
                raise LedgerError(f"its raw benchmark file {path} is missing (or not a regular file)")
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest()[:12] != match["sha"]:
                raise LedgerError(f"its raw benchmark file {path} does not match the sha256 in its name",
                                  hint=_REPAIR_HINT)
            target = self.root / record.artifact_id / name
            if target.exists():
                if target.read_bytes() != data:
                    raise LedgerError(f"its raw benchmark file differs from {target}, which was kept",
                                      hint=_REPAIR_HINT)
                continue
            missing.append((target, data))
        return missing

    def _merge_samples(self, source: Path, record: LedgerRecord) -> tuple[Path, bytes] | None:
        """Verify a source record's samples file; (target, bytes) when this ledger still needs a copy."""
        if record.samples_file is None:
            return None
        Ledger(source).load_samples(record)
        target = self.root / record.artifact_id / record.samples_file
        if target.exists():
            self.load_samples(record)  # an existing copy must be sound too, or the merged record is not
            return None
        return target, (source / record.artifact_id / record.samples_file).read_bytes()

    def _load(self, path: Path) -> LedgerRecord:
        """Read and check one record: valid, in its artifact's directory, named after its own bytes."""
        try:
            content = path.read_bytes()
            record = LedgerRecord.from_json(content)
        except (OSError, ValidationError) as exc:
            raise LedgerError(f"{path}: not a valid ledger record: {exc}", hint=_REPAIR_HINT) from exc
        expected = record_name(record, content)
        if path.relative_to(self.root).as_posix() != expected:
            raise LedgerError(
                f"{path}: its name does not match its content (expected {expected}); it was edited or renamed",
                hint=_REPAIR_HINT,
            )
        return record


def _source_records(source: Path) -> tuple[Path, list[Path]]:
    """The ledger root of a merge source and its record files.

    A ledger directory keeps its records at `<artifact_id>/<record>.json`. A CI matrix's ledgers arrive
    through actions/download-artifact with `pattern: ledger-*` and `path: ledgers`: several matched
    artifacts land in `ledgers/<artifact name>/` (each a ledger root), but since download-artifact v5
    (actions/download-artifact#416, src/download-artifact.ts: the download path is `resolvedPath` itself
    when `isSingleArtifactDownload || inputs.mergeMultiple || artifacts.length === 1`) a single matched
    artifact is extracted flat into `ledgers/`, so `ledgers/*` names its artifact directories
    (`ledgers/<artifact_id>/`). Such a directory is merged as what it is: one artifact's part of the
    ledger rooted at its parent. Record files anywhere else are refused, never merged as "0 added".
    """
    if not source.is_dir():
        raise LedgerError(f"{source}: no such ledger directory to merge")
    nested = sorted(source.glob("*/*.json"))
    if nested:
        return source, nested
    flat = sorted(source.glob("*.json"))
    if flat:
        return source.parent, flat
    elsewhere = sorted(source.rglob("*.json"))
    if elsewhere:
        shown = ", ".join(str(p.relative_to(source)) for p in elsewhere[:3])
        raise UsageError(
            f"{source}: holds {len(elsewhere)} .json file(s) ({shown}{' ...' if len(elsewhere) > 3 else ''}) but "
            "none where a ledger keeps its records (<artifact-id>/<record>.json): nothing was merged",
            hint="Pass the ledger directory itself (the one holding the artifact directories), or one artifact's "
                 "directory of it.",
        )
    return source, []


def _when(record: LedgerRecord) -> datetime:
    return datetime.fromisoformat(record.started_at)


def _read_samples(path: Path, record: LedgerRecord) -> tuple[Sample, ...]:
    jsonl = read_samples_file(path)
    if hashlib.sha256(jsonl).hexdigest() != record.samples_sha256:
        raise ValueError("the samples do not match the sha256 recorded for them")
    samples = tuple(Sample.model_validate_json(line) for line in jsonl.splitlines() if line.strip())
    check_samples(record, samples)
    return samples


def read_samples_file(path: Path, *, limit: int | None = None) -> bytes:
    """A samples file's JSON lines, decompressed within `limit` bytes (default `SAMPLES_LIMIT`): a regular file
    only (a FIFO would block the read forever), and a gzip that inflates past the limit (a decompression bomb)
    is refused once that much is read, never held whole."""
    limit = SAMPLES_LIMIT if limit is None else limit
    if not path.is_file():
        raise ValueError("not a regular file")
    with gzip.open(path, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"decompresses to more than {limit:,} bytes")
    return data
