"""Shared data of the card tests: paths, the synthetic Nanbeige ledger (imported by conftest and tests)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LEDGER_DEMO = ROOT / "tests" / "fixtures" / "ledger_demo" / "results"
CFF_SCHEMA = ROOT / "tests" / "fixtures" / "cff" / "schema-1.2.0.json"
sys.path.insert(0, str(HERE))

from synthetic import family_ledger  # noqa: E402

from hfrelease.cards import CardInputs, entry_for  # noqa: E402
from hfrelease.ledger.record import LedgerRecord  # noqa: E402
from hfrelease.manifest import Gate, Manifest, load_manifest  # noqa: E402

NANBEIGE_QUALITY = {"bf16": (0.8, 1.0), "fp8-dynamic": (0.8, 0.96), "nvfp4-fp8-loopshield": (0.76, 0.9),
                    "nvfp4a16": (0.7, 0.85)}
NANBEIGE_SPEED = {"bf16": 170.0, "fp8-dynamic": 244.0, "nvfp4-fp8-loopshield": 251.0, "nvfp4a16": 262.0}
NANBEIGE_SIZES = {"bf16": 7_900_000_000, "fp8-dynamic": 4_900_000_000, "nvfp4-fp8-loopshield": 3_600_000_000,
                  "nvfp4a16": 3_100_000_000, "eagle3": 410_000_000}



def demo_manifest_as_recorded(ledger_root: Path = LEDGER_DEMO) -> Manifest:
    """The demo manifest as its recorded ledger measured it: without the gates, workloads and artifacts the ledger
    holds no record of, and without the draft matrix when no matrix point is recorded.

    The recorded ledger (model_cards/demo/results, copied here) comes from a real `scripts/demo` run, re-run
    once after the manifest gains a gate, workload or matrix; until then the card tests render what was
    measured (a card of an unmeasured gate is refused, rightly). Once the ledger is re-recorded this is the
    manifest itself."""
    from hfrelease.ledger.store import Ledger

    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    records = Ledger(ledger_root).records()
    workloads = {r.subject_id for r in records if r.kind in ("speed", "speed-sweep")}
    served = {(r.artifact_id, r.draft_artifact_id) for r in records if r.draft_artifact_id is not None}
    # Losslessness is measured by the per-request pass (issue 24); a ledger recorded before it has no
    # identical-output share, so its draft's `min_identical_outputs` gate is left out as an unmeasured gate is.
    compared = any("identical_output_share" in r.metrics for r in records)
    # Nor the artifacts it holds no record of (the demo gained a trained EAGLE-3 head and an NVFP4 quant after it).
    recorded = {r.artifact_id for r in records} | {r.draft_artifact_id for r in records}
    artifacts = []
    for declared in manifest.artifact:
        if declared.id not in recorded:
            continue
        draft = declared.draft
        if draft is not None and not compared and draft.min_identical_outputs is not None:
            draft = draft.model_copy(update={"min_identical_outputs": None})
        unmeasured = draft is not None and not any(d == declared.id and a != draft.target for a, d in served)
        if draft is not None and draft.matrix and unmeasured:
            artifacts.append(declared.model_copy(update={"draft": draft.model_copy(update={"matrix": False})}))
        elif draft is not declared.draft:
            artifacts.append(declared.model_copy(update={"draft": draft}))
        else:
            artifacts.append(declared)
    kept = {a.id for a in artifacts}
    return manifest.model_copy(update={"gate": _gates_as_recorded(manifest, records, kept),
                                       "workload": [w for w in manifest.workload if w.id in workloads],
                                       "speculative": [s for s in manifest.speculative if s.draft in (None, *kept)],
                                       "artifact": artifacts})


def _gates_as_recorded(manifest: Manifest, records: list[LedgerRecord], kept: set[str]) -> list[Gate]:
    """The recorded gates, each on the artifacts it was measured on: a gate whose `artifacts` the manifest narrowed
    after the recording (the demo's `fidelity` gave its NVFP4 quant to `fidelity-fp4`, which the ledger predates)
    keeps the artifacts its records judge, so a card shows what was measured, against the bounds it was measured
    with; one narrowed to none of the kept artifacts is dropped."""
    measured: dict[str, set[str]] = {}
    for r in records:
        if r.kind == "gate":
            measured.setdefault(r.subject_id, set()).add(r.artifact_id)
    gates = []
    for gate in (g for g in manifest.gate if g.id in measured):
        if gate.artifacts is None:
            gates.append(gate)
            continue
        # A fidelity gate's records include the reference's (its continuations), which it does not name.
        judged = measured[gate.id] - ({manifest.reference.id} if gate.is_fidelity else set())
        chosen = [a.id for a in manifest.artifact if a.id in kept and (a.id in gate.artifacts or a.id in judged)]
        if chosen:
            gates.append(gate.model_copy(update={"artifacts": chosen}))
    return gates


def write_demo_toml_as_recorded(family: Path) -> None:
    """Rewrite `family`'s release.toml (a copy of model_cards/demo) as its committed ledger measured it: one
    fidelity gate over every quant. The ledger predates the NVFP4 quant's own gate (`fidelity-fp4`), whose records
    carry its id; until the ledger is re-recorded, a render of the copy renders what was measured."""
    import tomllib

    import tomli_w

    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    gates = {g["id"]: g for g in data["gate"]}
    assert gates.pop("fidelity-fp4")["artifacts"] == ["nvfp4"] and "nvfp4" not in gates["fidelity"]["artifacts"]
    del gates["fidelity"]["artifacts"]
    data["gate"] = list(gates.values())
    path.write_text(tomli_w.dumps(data))


def nanbeige_inputs(manifest: Manifest, *, with_speed: bool = True) -> CardInputs:
    """Nanbeige's manifest and sections over a synthetic ledger built in memory."""
    from hfrelease.cards.inputs import read_sections

    records = family_ledger(manifest, quality=NANBEIGE_QUALITY, speed=NANBEIGE_SPEED, sizes=NANBEIGE_SIZES,
                            with_speed=with_speed)
    entries = tuple(entry_for(r, {s.doc_id: s.score for s in r.samples}, r.samples) for r in records)
    files = {"eagle3": {"train_command.txt": (manifest.root / "eagle3" / "train_command.txt").read_text()}}
    return CardInputs(manifest=manifest, records=entries, sections=read_sections(manifest), files=files)
