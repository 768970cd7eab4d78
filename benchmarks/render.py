"""Rendering a five-artifact family's cards (plots included) against a bare Jinja render of the same templates.

    .venv/bin/python benchmarks/render.py [--rounds 5]

The family is the flagship Nanbeige manifest over a synthetic ledger (tests/cards/synthetic.py): 25 gate
records with 100-250 paired samples each and the speed records of its three workloads. Reported:

- cold: one `hfrelease render`-equivalent in a fresh interpreter (imports, matplotlib, ledger selection,
  paired bootstraps, five cards, plots), CPU seconds (user + system) — the bar is <= 2 s;
- warm: the same in-process, median of rounds; and the bare Jinja render of the five bodies from
  already-built contexts, median of rounds; their ratio is what the card stage costs over templating.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cards"))

COLD = """
import sys, time
sys.path.insert(0, {cards!r})
from pathlib import Path
from hfrelease.manifest import load_manifest
from conftest import nanbeige_inputs
inputs = nanbeige_inputs(load_manifest(Path({family!r}), check_files=False))
t = time.process_time()
from hfrelease.cards import render_family
render_family(inputs)
print(time.process_time() - t)
"""


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cold_render() -> tuple[float, float]:
    """(CPU s of the render itself, CPU s of the whole fresh process) in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = COLD.format(cards=str(ROOT / "tests" / "cards"), family=str(ROOT / "model_cards" / "nanbeige4.2-3b"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(out.stdout.strip().splitlines()[-1]), whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from conftest import nanbeige_inputs

    from hfrelease.cards import render_family
    from hfrelease.cards.context import build_context
    from hfrelease.cards.environment import card_environment
    from hfrelease.cards.measurements import measure_family
    from hfrelease.manifest import load_manifest

    cold, whole = cold_render()
    inputs = nanbeige_inputs(load_manifest(ROOT / "model_cards" / "nanbeige4.2-3b", check_files=False))
    environment = card_environment()
    measured = measure_family(inputs)
    contexts = [(a.kind, build_context(inputs, measured, a)[0]) for a in inputs.manifest.artifact]
    render_family(inputs)  # warm caches (imports, compiled templates) for both sides
    full, bare = [], []
    for _ in range(args.rounds):
        t = time.process_time()
        family = render_family(inputs, environment=environment)
        full.append(time.process_time() - t)
        t = time.process_time()
        for kind, context in contexts:
            environment.get_template(f"{kind}.md.j2").render(context)
        bare.append(time.process_time() - t)
    plots = sum(1 for c in family.cards for n in c.files if n.endswith(".png"))
    print(f"cards: {len(family.cards)}, plot files: {plots}, records: {len(inputs.records)}")
    print(f"cold render in a fresh process: {cold:.3f} s CPU (whole process incl. interpreter start: {whole:.3f} s)")
    print(f"warm full render, median of {args.rounds}: {statistics.median(full):.4f} s CPU")
    print(f"bare Jinja render of the same 5 bodies, median: {statistics.median(bare):.4f} s CPU")
    print(f"ratio full / bare: {statistics.median(full) / statistics.median(bare):.1f}")


if __name__ == "__main__":
    main()
