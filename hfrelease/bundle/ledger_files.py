"""A repo's `ledger/` folder in the bundle: the artifact's own records with the files they name, and the
records of other artifacts its card cites (`gather_ledger`, called by `hfrelease.bundle.gather.gather`).
"""

from __future__ import annotations

from pathlib import Path

from hfrelease.bundle.candidates import Candidates
from hfrelease.files.allowlist import Kind
from hfrelease.ledger.record import RAW_KEYS
from hfrelease.manifest import Artifact, Manifest

LEDGER_PREFIX = "ledger/"
SAMPLES_SUFFIX = ".samples.jsonl.gz"
# Every raw file type a record may name (hfrelease.ledger.record.RAW_KEYS): each ships beside its record.
RAW_SUFFIXES = tuple(f".{kind}" for kind in RAW_KEYS.values())


def gather_ledger(manifest: Manifest, artifact: Artifact, found: Candidates) -> None:
    """results/<artifact-id>/: each record, the samples file it names and the raw `vllm bench serve` repeats it
    names (`extra.raw`, `*.bench.jsonl`), as ledger/<name>; and every record of another artifact that the
    rendered card cites (the reference's, above all, published or not), as ledger/<that id>/<name>.

    The repeats ship because a speed record keeps only their median: `hfrelease compare` reading a release
    tag draws a speed row's interval from them (a few KiB each). The other raw files (`/metrics` snapshots,
    fidelity logprobs, up to ~1 MiB each) serve cards, which are rendered before publishing, and stay local.
    The cited records of other artifacts ship in each repo whose card cites them (issue 27): the card says
    every record behind it ships in its repo's `ledger/`, which held only its own, so a reference with
    `publish = false` shipped nowhere. Copies in each citing repo (a few KiB per record) keep each repo
    self-contained, where a separate family ledger repo would be one more repo every card, tag and verify
    must name.
    Every entry is judged before the ledger reads anything (a link out, a FIFO, a device must not be read);
    then reading every record validates it (name matches content, schema ok), each samples file is checked
    against its record's sha256 and each repeats file against the sha256 in its name, so a damaged record
    or a file that is not the measured one never ships. A samples or repeats file no record names is left out.
    """
    directory = manifest.ledger_dir / artifact.id
    if not directory.is_dir() and not directory.is_symlink():
        found.notes.append(f"no ledger records in {directory}: the card cites no measured results")
    else:
        _gather_records(manifest, artifact.id, found, prefix=LEDGER_PREFIX, only=None)
    for other, names in sorted(cited_records(manifest, artifact).items()):
        _gather_records(manifest, other, found, prefix=f"{LEDGER_PREFIX}{other}/", only=names)


def cited_records(manifest: Manifest, artifact: Artifact) -> dict[str, set[str]]:
    """Record names (`<name>.json`) of other artifacts that the artifact's rendered card cites, by artifact id."""
    from hfrelease.cards.card_text import provenance_table

    card = manifest.root / artifact.id / "README.md"
    if not card.is_file() or card.is_symlink():
        return {}  # no card yet (a note says so), or a link the rendered walk refuses
    ids = {a.id for a in manifest.artifact} - {artifact.id}
    cited: dict[str, set[str]] = {}
    for _, names in provenance_table(card.read_text(encoding="utf-8", errors="replace")).values():
        for name in names:
            owner, _, record = name.partition("/")
            if owner in ids and record and "/" not in record:
                cited.setdefault(owner, set()).add(record)
    return cited


def _gather_records(manifest: Manifest, artifact_id: str, found: Candidates, *, prefix: str,
                    only: set[str] | None) -> None:
    """One artifact's records (`only`: these record names and the files they name) as `prefix`<name>."""
    from hfrelease.ledger.record import raw_files
    from hfrelease.ledger.store import Ledger, record_name

    results = manifest.ledger_dir
    directory = results / artifact_id
    where = f"results/{artifact_id}/"
    if not directory.is_dir() and not directory.is_symlink():
        return  # a cited record that is not in the ledger: `check --cards` says so
    problem = found.tree.outside(directory)
    if problem is not None:
        found.refuse(directory, problem.reason, problem.fix, where=where)
        return
    before = len(found.refusals)
    candidates: list[tuple[str, Path]] = []
    for path in sorted(directory.iterdir()):
        if path.name.startswith("."):
            continue  # an interrupted atomic write leaves a hidden temp file
        if path.is_dir() and not path.is_symlink():
            continue
        shipped = path.name.endswith((".json", SAMPLES_SUFFIX, *RAW_SUFFIXES))
        if only is not None and path.name.endswith(".json") and path.name not in only:
            continue
        if not shipped:  # raw benchmark files stay local, but are read by cards: no link out either
            outside = found.tree.outside(path)
            if outside is not None:
                found.refuse(path, outside.reason, outside.fix, where=where + path.name)
            continue
        real = found.judge(path, kind=Kind.LEDGER, name=path.name, where=where + path.name)
        if real is not None:
            candidates.append((path.name, real))
    if len(found.refusals) > before:
        return  # the ledger reads nothing that was refused
    ledger = Ledger(results)
    # A record's name is its content's (hfrelease.ledger.store.record_name), re-derived from its canonical bytes.
    records = [r for r in ledger.records(artifact_id=artifact_id)
               if only is None or record_name(r, r.to_json()).rsplit("/", 1)[-1] in only]  # fmt: skip
    named = {r.samples_file for r in records if r.samples_file is not None}
    present = {name for name, _ in candidates}
    for record in records:
        ledger.load_samples(record)  # verifies the samples file's sha256 against the record
        # Every raw file a record names ships with it (the benchmark's repeats, the /metrics scrapes, the
        # per-request outcomes, the fidelity gate's responses): `compare` from release tags re-derives its
        # intervals from them and refuses a side whose files are missing (hfrelease.compare.sides).
        for _, name in raw_files(record):
            if name in present:
                named.add(name)
                ledger.raw_bytes(record, name)  # verifies the file against the sha256 in its name
    left = [name for name, _ in candidates if name.endswith((SAMPLES_SUFFIX, *RAW_SUFFIXES)) and name not in named]
    if left and only is None:
        found.notes.append(f"samples or repeats files no record in {directory} names, not published: "
                           f"{', '.join(left)}")
    for name, real in candidates:
        if name not in left:
            found.add(prefix + name, real, "ledger-record", where=where + name)
