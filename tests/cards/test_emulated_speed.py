"""Speed an emulation kernel measured (NVFP4 on a CPU build of vLLM, `hfrelease.serving.emulation`) is labelled
"emulated" and draws no best config and no choice advice: the numbers are NVFP4's, the speed is not."""

from __future__ import annotations

import re

from card_fixtures import NANBEIGE_QUALITY, NANBEIGE_SIZES
from synthetic import family_ledger

from hfrelease.cards import CardInputs, entry_for, render_family
from hfrelease.cards.measurements import measure_family
from hfrelease.ledger.record import LedgerRecord

NVFP4 = "nvfp4-fp8-loopshield"
# The fastest artifact by far: were its emulated figures compared, it would be the best choice everywhere.
SPEED = {"bf16": 300.0, "fp8-dynamic": 320.0, NVFP4: 900.0, "nvfp4a16": 262.0}


def _emulated(record: LedgerRecord) -> LedgerRecord:
    if record.artifact_id != NVFP4:
        return record
    hardware = {**record.hardware, "linear_kernels": {"NVFP4": "EmulationNvFp4LinearKernel"}, "emulated": ["NVFP4"]}
    return record.model_copy(update={"hardware": hardware})


def _inputs(nanbeige: CardInputs) -> CardInputs:
    manifest = nanbeige.manifest
    records = [_emulated(r) for r in family_ledger(manifest, quality=NANBEIGE_QUALITY, sizes=NANBEIGE_SIZES,
                                                   speed=SPEED)]
    return CardInputs(manifest=manifest, records=tuple(entry_for(r, {s.doc_id: s.score for s in r.samples},
                                                                 r.samples) for r in records),
                      sections=nanbeige.sections, files=nanbeige.files)


def test_an_emulated_artifact_has_no_best_config(nanbeige: CardInputs) -> None:
    """Its points stay (the speed tables show them), but no config of it is called best."""
    measured = measure_family(_inputs(nanbeige))
    points = measured.points(artifact_id=NVFP4)
    assert points and all(p.emulated for p in points)
    assert not any(p.emulated for p in measured.points(artifact_id="fp8-dynamic"))
    workloads = {p.workload.id for p in points}
    assert all(measured.best_batch1(NVFP4, w) is None for w in workloads)
    assert all(measured.best_batch1("fp8-dynamic", w) is not None for w in workloads)


def test_the_choice_table_says_emulated_and_advises_nothing_from_it(nanbeige: CardInputs) -> None:
    """The family table's speed cell of the emulated artifact is "emulated", no tok/s; no other artifact is said
    to be beaten by it, as it would be on its 900 tok/s."""
    card = render_family(_inputs(nanbeige), plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    table = card.readme.split("## Which artifact should I choose?")[1].split("<!-- measured:end -->")[0]
    row = next(line for line in table.splitlines() if "LoopShield" in line)
    assert "| emulated |" in row and "900" not in row
    assert "dominated by" not in table or NVFP4 not in table.split("dominated by")[1].split("|")[0]


def test_its_speed_tables_label_every_figure_emulated(nanbeige: CardInputs) -> None:
    """On its own card every tok/s figure of the emulated artifact carries the label: the opening, the lines
    against the reference, each speed table's rows and the context sweep's (the numbers' registry at the end,
    which lists ids, aside)."""
    card = render_family(_inputs(nanbeige), plots=False, artifacts=[NVFP4]).card(NVFP4)
    figures = [line for line in card.readme.splitlines()
               if ("900.0 (873.0" in line or ("tok/s" in line and "900.0" in line)) and not line.startswith("- `")]
    # A table cell says "900.0 (873.0-918.0), emulated"; prose puts the label after the unit, in brackets
    # ("900.0 (873.0-918.0) batch-1 output tok/s on Reasoning (emulated)").
    labelled = re.compile(r"900\.0 \(873\.0\u2013918\.0\)(, emulated| [^;]*?tok/s[^;]*? \((?:[^()]*; )?emulated[;)])")
    assert len(figures) >= 5 and all(labelled.search(line) for line in figures), figures
