"""Everything a render reads from disk, read once into plain values: manifest, ledger, sections, files.

Rendering is a pure function of a `CardInputs` and the templates: this module is the only place of the
card stage (besides `write.py`) that touches the file system.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from hfrelease.cards.errors import CardError
from hfrelease.ledger.record import LedgerRecord, Sample
from hfrelease.ledger.store import Ledger, record_name
from hfrelease.manifest import Manifest

if TYPE_CHECKING:
    from hfrelease.compare.rows import FamilyComparison

# The hand-written slots a card has, and where the templates put them. A file with any other name in
# sections/ is a mistake (a typo would silently drop prose from the card), so it is refused.
SECTION_NAMES: Mapping[str, str] = {
    "summary": "prose under the title, after the generated headline",
    "story": "free-form sections after the summary, with their own ## headings (why this quant, ...)",
    "quality": "notes under the quality table (judge protocols, closed harnesses)",
    "speed": "notes under the speed table",
    "load": "notes under the load table",
    "acceptance": "notes under the acceptance table",
    "serving": "notes under the serving commands",
    "creation": "notes under the quantization recipe",
    "training": "the training story of a draft (corpus, epochs, hardware)",
    "limitations": "bullet points of known limitations",
    "choose": "the rule of thumb above the family table",
    "choose_when": "one line for this artifact's 'Choose when' cell of the family table (replaces the generated one)",
    "matrix": "notes under the full quality matrix",
    "provenance": "notes under benchmark provenance (closed harnesses, vendor numbers)",
    "links": "extra bullet points for links & provenance",
}
FAMILY = ""  # the key of family-wide sections in `CardInputs.sections`


@dataclass(frozen=True, kw_only=True)
class RecordEntry:
    """A ledger record with its file name (relative to the ledger root) and per-sample scores."""

    name: str
    record: LedgerRecord
    scores: Mapping[str, float] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()  # a gate record's per-sample outcomes (what the gate verdict judges)


@dataclass(frozen=True, kw_only=True)
class HardwareLedger:
    """Another hardware's ledger beside the family's (`results-h200/` beside `results/`), read as it is."""

    name: str  # the directory's name
    entries: tuple[RecordEntry, ...]


@dataclass(frozen=True, kw_only=True)
class CardInputs:
    """What a family's cards are made from; built by `read_inputs` or directly by tests."""

    manifest: Manifest
    records: tuple[RecordEntry, ...]
    sections: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # FAMILY or artifact id -> slot -> text
    files: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # artifact id -> declared path -> text
    changes: FamilyComparison | None = None  # `render --since TAG`: the "Changes since" section's rows
    hardwares: tuple[HardwareLedger, ...] = ()  # other hardware's ledgers (`cards/hardware.py`)


def entry_for(record: LedgerRecord, scores: Mapping[str, float] | None = None,
              samples: tuple[Sample, ...] = ()) -> RecordEntry:
    """A `RecordEntry` named as the ledger names the record's file (content-addressed)."""
    return RecordEntry(name=record_name(record, record.to_json()), record=record, scores=dict(scores or {}),
                       samples=samples)


def read_inputs(manifest: Manifest, *, ledger_root: Path | None = None) -> CardInputs:
    """Read the family's ledger (`results/`), other hardware's ledgers beside it (`results-<name>/`),
    `sections/` and the artifacts' declared text files."""
    # Another hardware's ledger sits beside the family's as `results-<name>/` (`results-h200/`); a merged ledger
    # elsewhere (`ledger_root`) has none.
    root = manifest.ledger_dir
    others = [] if ledger_root is not None else sorted(
        p for p in root.parent.glob(f"{root.name}-*") if p.is_dir() and not p.is_symlink())
    return CardInputs(
        manifest=manifest,
        records=_read_ledger(manifest, ledger_root),
        sections=read_sections(manifest),
        files=_read_files(manifest),
        hardwares=tuple(HardwareLedger(name=p.name, entries=_read_ledger(manifest, p)) for p in others),
    )


def _read_ledger(manifest: Manifest, ledger_root: Path | None) -> tuple[RecordEntry, ...]:
    ledger = Ledger(ledger_root or manifest.ledger_dir)
    problems = results_problems(manifest, ledger_root=ledger_root)
    if problems:
        raise CardError(
            "the ledger holds files no card may read:\n" + "\n".join(f"  - {p}: {m}" for p, m in problems),
            hint="A ledger's records and samples are regular files inside its directory (a link out of it is "
                 "never followed): copy them in, or remove the links.",
        )
    entries: list[RecordEntry] = []
    if ledger.root.is_dir():
        for record in ledger.records():
            samples = ledger.load_samples(record) if record.kind == "gate" else ()
            entries.append(entry_for(record, {s.doc_id: s.score for s in samples}, samples))
    return tuple(entries)


def results_problems(manifest: Manifest, *, ledger_root: Path | None = None) -> list[tuple[str, str]]:
    """(path, what is wrong) of each entry of the ledger that resolves out of the family (or of `ledger_root`,
    a merged ledger elsewhere) or is not a regular file: checked before the ledger reads any of them."""
    from hfrelease.files.allowlist import Tree

    results = ledger_root or manifest.ledger_dir
    tree = Tree.of(ledger_root or manifest.root)
    shown = (lambda p: p.relative_to(manifest.root).as_posix()) if ledger_root is None else str
    problems: list[tuple[str, str]] = []
    if not results.is_dir() and not results.is_symlink():
        return problems
    entries = [results, *results.iterdir()] if tree.outside(results) is None else [results]
    for entry in entries:
        children = sorted(entry.iterdir()) if entry != results and entry.is_dir() and not entry.is_symlink() else []
        for path in [entry, *children]:
            outside = tree.outside(path)
            if outside is not None:
                problems.append((shown(path), f"{outside.reason} ({outside.fix})"))
            elif path != results and not path.is_dir() and not path.is_file():
                problems.append((shown(path), "not a regular file (a FIFO, device or socket)"))
    return problems


def read_sections(manifest: Manifest) -> dict[str, dict[str, str]]:
    """`sections/*.md` (family-wide) and `sections/<artifact-id>/*.md`; unknown names are refused at once."""
    found, problems = _scan_sections(manifest)
    if problems:
        raise CardError(
            "sections/ holds files no card can quote:\n" + "\n".join(f"  - {p}: {m}" for p, m in problems),
            hint="Section files are named after their slot: " + ", ".join(SECTION_NAMES) + "; each is a regular "
                 "UTF-8 file inside the family directory (a link out of it is never followed).",
        )
    return found


def section_problems(manifest: Manifest) -> list[tuple[str, str]]:
    """(family-relative path, what is wrong) of each file in sections/ a render would refuse (for `check`)."""
    return _scan_sections(manifest)[1]


def _scan_sections(manifest: Manifest) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    from hfrelease.files.allowlist import Kind, Problem, Tree, admit

    root = manifest.root / "sections"
    found: dict[str, dict[str, str]] = {FAMILY: {}}
    problems: list[tuple[str, str]] = []
    if not root.is_dir() and not root.is_symlink():
        return found, problems
    # Section text goes into the README as written: it must come from the family's own tree, like every file
    # a release ships (a linked sections/summary.md once put an outside file's text into a card).
    tree = Tree.of(manifest.root)
    outside = tree.outside(root)
    if outside is not None:
        return found, [("sections", f"{outside.reason} ({outside.fix})")]
    ids = [a.id for a in manifest.artifact]
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        shown = f"sections/{relative.as_posix()}"
        outside = tree.outside(path)
        if outside is not None:
            problems.append((shown, f"{outside.reason} ({outside.fix})"))
            continue
        if path.is_dir() or path.name.startswith(".") or path.suffix != ".md":
            if path.is_dir() and len(relative.parts) == 1 and relative.name not in ids:
                problems.append((shown, f"not an artifact id{_did_you_mean(relative.name, ids)}"))
            continue
        owner = FAMILY if len(relative.parts) == 1 else relative.parts[0]
        if len(relative.parts) > 2 or (owner != FAMILY and owner not in ids):
            continue  # reported with its directory above
        if path.stem not in SECTION_NAMES:
            problems.append((shown, f"not a section name{_did_you_mean(path.stem, list(SECTION_NAMES))}"))
            continue
        verdict = admit(path, tree=tree, kind=Kind.SECTION)
        if isinstance(verdict, Problem):
            problems.append((shown, f"{verdict.reason} ({verdict.fix})"))
            continue
        found.setdefault(owner, {})[path.stem] = verdict.read_text(encoding="utf-8")
    return found, problems


def _read_files(manifest: Manifest) -> dict[str, dict[str, str]]:
    from hfrelease.files.allowlist import Kind, Problem, Tree, admit

    found: dict[str, dict[str, str]] = {}
    for artifact in manifest.artifact:
        source = manifest.resolve(artifact.source.path) if artifact.source.path else None
        tree = Tree.of(manifest.root, source)  # where the bundle would take the file from
        for relative in artifact.files:
            name = PurePosixPath(relative).name
            if name not in {"train_command.txt", "val_metrics.json"}:
                continue  # only these two are shown in a card; other declared files are only uploaded
            path = manifest.root / relative
            verdict = admit(path, tree=tree, kind=Kind.DECLARED)
            if isinstance(verdict, Problem):
                raise CardError(
                    f"{path}: declared in files of artifact {artifact.id!r} but {verdict.reason}",
                    hint=f"{verdict.fix[:1].upper()}{verdict.fix[1:]}; `hfrelease check` lists every such file.",
                )
            # Keyed by the declared path: speculators writes one val_metrics.json per epoch directory.
            found.setdefault(artifact.id, {})[PurePosixPath(relative).as_posix()] = verdict.read_text(encoding="utf-8")
    return found


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
