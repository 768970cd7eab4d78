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
from hfrelease.manifest import Manifest, load_manifest  # noqa: E402

NANBEIGE_QUALITY = {"bf16": (0.8, 1.0), "fp8-dynamic": (0.8, 0.96), "nvfp4-fp8-loopshield": (0.76, 0.9),
                    "nvfp4a16": (0.7, 0.85)}
NANBEIGE_SPEED = {"bf16": 170.0, "fp8-dynamic": 244.0, "nvfp4-fp8-loopshield": 251.0, "nvfp4a16": 262.0}
NANBEIGE_SIZES = {"bf16": 7_900_000_000, "fp8-dynamic": 4_900_000_000, "nvfp4-fp8-loopshield": 3_600_000_000,
                  "nvfp4a16": 3_100_000_000, "eagle3": 410_000_000}


def demo_manifest() -> Manifest:
    """The demo family's manifest (model_cards/demo/release.toml), which its recorded ledger measured."""
    return load_manifest(ROOT / "model_cards" / "demo", check_files=False)


def best_config(readme: str, section: str) -> str:
    """The config a card calls best in a workload's speed section ("### <section>"), as its ledger judged it."""
    import re

    text = readme.split(f"### {section}\n")[1].split("\n## ", maxsplit=1)[0]
    found = re.search(r"best config: `([^`]+)`", text)
    assert found, text[:500]
    return found.group(1)


def nanbeige_inputs(manifest: Manifest, *, with_speed: bool = True) -> CardInputs:
    """Nanbeige's manifest and sections over a synthetic ledger built in memory."""
    from hfrelease.cards.inputs import read_sections

    records = family_ledger(manifest, quality=NANBEIGE_QUALITY, speed=NANBEIGE_SPEED, sizes=NANBEIGE_SIZES,
                            with_speed=with_speed)
    entries = tuple(entry_for(r, {s.doc_id: s.score for s in r.samples}, r.samples) for r in records)
    files = {"eagle3": {"train_command.txt": (manifest.root / "eagle3" / "train_command.txt").read_text()}}
    return CardInputs(manifest=manifest, records=entries, sections=read_sections(manifest), files=files)
