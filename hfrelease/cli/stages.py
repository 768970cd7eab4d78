"""The pipeline stages whose commands exist before their implementation lands.

Each parses its real options (so scripts and CI can be written against them now) and then says plainly
which issue builds it, with exit code 8. The options are validated: a bad one is a usage error (2).
"""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.errors import NotBuiltError

_MANIFEST = click.argument("manifest", type=click.Path(path_type=Path), default=Path())


@click.command("eval")
@_MANIFEST
@click.option("--artifact", "artifacts", multiple=True, help="Evaluate only this artifact id (repeatable).")
@click.option("--gate", "gates", multiple=True, help="Run only this gate id (repeatable).")
@click.option("--endpoint", help="Attach to a running OpenAI-compatible vLLM server instead of starting one.")
@click.option("--force", is_flag=True, help="Re-measure even when a matching result is recorded.")
@click.option("--dry-run", is_flag=True, help="Print every vllm serve and lm-eval invocation; start nothing.")
@click.option("--speed/--no-speed", default=True, help="Also run the speed anchors (workloads).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
def eval_(
    manifest: Path, artifacts: tuple[str, ...], gates: tuple[str, ...], endpoint: str | None,
    force: bool, dry_run: bool, speed: bool, as_json: bool,
) -> None:
    """Serve every artifact with vLLM, run its gates and speed anchors, record results in the ledger."""
    raise NotBuiltError("eval", "eval issue (serving, lm-eval gates, ledger)")


@click.command()
@_MANIFEST
@click.option("--diff", is_flag=True, help="Show what changed against the last render.")
@click.option("--json", "as_json", is_flag=True, help="Print the rendered files as JSON on stdout.")
def render(manifest: Path, diff: bool, as_json: bool) -> None:
    """Render model cards, citations and plots from the ledger."""
    raise NotBuiltError("render", "cards issue")


@click.command()
@_MANIFEST
@click.option("--hub", default="local", show_default=True, help="Hub endpoint, or `local` for the built-in Hub.")
@click.option("--tag", help="The git tag being released; must equal the manifest's release tag.")
def release(manifest: Path, hub: str, tag: str | None) -> None:
    """Run the release job graph (check, eval per artifact, merge, render, publish) on this machine."""
    raise NotBuiltError("release", "GitHub Actions issue")
