"""`hfrelease demo build`: build the tiny demo family the README's demo and the tests run on."""

from __future__ import annotations

import os
from pathlib import Path

import click


@click.group()
def demo() -> None:
    """The built-in demo family (a tiny model built on this CPU)."""


@demo.command()
@click.option("--out", type=click.Path(path_type=Path, file_okay=False),
              help="Build directory (default: build/demo in the checkout).")
@click.option("--quant-python", type=click.Path(path_type=Path),
              help="Python of the llm-compressor environment (default: $HFRELEASE_QUANT_PYTHON or .venv-quant).")
@click.option("--speculators-python", type=click.Path(path_type=Path),
              help="Python of speculators' environment (default: $HFRELEASE_SPECULATORS_PYTHON or .venv-speculators).")
@click.option("--seed", default=0, show_default=True, help="Training seed.")
def build(out: Path | None, quant_python: Path | None, speculators_python: Path | None, seed: int) -> None:
    """Train, quantize and save the demo family's artifacts (skipped when already built)."""
    from hfrelease.cli.output import done, say, working
    from hfrelease.demo.build import build_demo_family
    from hfrelease.demo.paths import default_build_dir, default_quant_python

    out = out or default_build_dir()
    with working("building the demo family") as progress:
        artifacts = build_demo_family(out, quant_python=quant_python or default_quant_python(os.environ),
                                      speculators_python=speculators_python, seed=seed, progress=progress)
    for artifact_id, path in artifacts.items():
        say(f"  {artifact_id:<14} {path}")
    done(f"demo family ready in {out}")


@demo.command()
@click.argument("manifest", type=click.Path(path_type=Path), default="model_cards/demo")
@click.option("--build", "build_dir", type=click.Path(path_type=Path),
              help="The demo build whose vendor repos to pin (default: build/demo in the checkout).")
@click.option("--hub-root", type=click.Path(path_type=Path, file_okay=False),
              help="Also make the vendor repos' main on the local Hub in this directory hold the pinned heads "
                   "(the vendor pushing the draft's new head after the previous release).")
def pin(manifest: Path, build_dir: Path | None, hub_root: Path | None) -> None:
    """Pin MANIFEST's Hub sources to the revisions `demo build` uploaded (a working copy's release.toml).

    The maintainer's step after an upload ("pin the revision in release.toml"), for each of the demo's vendor
    repos (its reference and its draft): each build has its own commit ids, so a working copy of
    model_cards/demo is pinned to this machine's. The drafts' training provenance (train_command.txt and
    <epoch>/val_metrics.json, the draft's and the EAGLE-3 head's `files`) is copied from the same build.
    """
    from hfrelease.cli.output import say
    from hfrelease.demo.versions import pin_working_copy

    for line in pin_working_copy(manifest, build_dir=build_dir, hub_root=hub_root):
        say(f"  {line}")


@demo.command()
@click.argument("family", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--hub-root", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="The local Hub the previous release goes to (its draft repo's main then holds the previous head).")
@click.option("--build", "build_dir", type=click.Path(path_type=Path),
              help="The demo build (default: build/demo in the checkout).")
def previous(family: Path, hub_root: Path, build_dir: Path | None) -> None:
    """Make FAMILY (a working copy of model_cards/demo) the demo's previous release, version 0.0.

    Its drafts are the previous heads `demo build` made (the draft trained for half the epochs, the EAGLE-3
    head without thinking data), each with its training provenance; it keeps only the drafts, their targets
    and the workloads serving them, so releasing it measures what comparing the heads needs.
    """
    from hfrelease.cli.output import say
    from hfrelease.demo.versions import make_previous_release

    for line in make_previous_release(family, hub_root=hub_root, build_dir=build_dir):
        say(f"  {line}")
