"""Render a family's cards: a pure function of (inputs, templates) → the files of each card directory.

Per artifact: README.md (front matter + body), CITATION.cff, citation.bib, plots/*.png,
.eval_results/*.yaml and every_eval_ever/data/... (the gates' Every Eval Ever records). Nothing is written
here (`write.py` does that), so tests and `--diff` compare rendered bytes directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import ModelCard
from jinja2 import TemplateError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from hfrelease.cards import citation, every_eval_ever, frontmatter
from hfrelease.cards.context import build_context
from hfrelease.cards.environment import card_environment
from hfrelease.cards.errors import CardError
from hfrelease.cards.hardware import hardware_context
from hfrelease.cards.inputs import CardInputs
from hfrelease.cards.measurements import FamilyMeasurements, measure_family
from hfrelease.cards.numbers import NumberRow
from hfrelease.cards.plots import PlotData, draw
from hfrelease.cards.template_bounds import render_bounded
from hfrelease.cards.view import Context
from hfrelease.manifest import Artifact

README = "README.md"
CFF = "CITATION.cff"
BIBTEX = "citation.bib"


@dataclass(frozen=True, kw_only=True)
class RenderedCard:
    """One artifact's card directory, as bytes per relative path."""

    artifact_id: str
    files: Mapping[str, bytes]
    numbers: tuple[NumberRow, ...] = field(default_factory=tuple)

    @property
    def readme(self) -> str:
        return self.files[README].decode()


@dataclass(frozen=True, kw_only=True)
class RenderedFamily:
    cards: tuple[RenderedCard, ...]

    def card(self, artifact_id: str) -> RenderedCard:
        return next(c for c in self.cards if c.artifact_id == artifact_id)


def render_family(
    inputs: CardInputs, *, environment: SandboxedEnvironment | None = None, plots: bool = True,
    artifacts: list[str] | None = None,
) -> RenderedFamily:
    """Every artifact's card (or those named in `artifacts`), from one selection of the ledger."""
    manifest = inputs.manifest
    env = environment or card_environment(manifest.root / "templates")
    measured = measure_family(inputs)
    drawn: dict[PlotData, bytes] = {}  # plots shared by several cards are drawn once
    cards = []
    for artifact in manifest.artifact:
        if artifacts is not None and artifact.id not in artifacts:
            continue
        cards.append(render_card(inputs, measured, artifact, environment=env, plots=plots, drawn=drawn))
    return RenderedFamily(cards=tuple(cards))


def render_card(
    inputs: CardInputs, measured: FamilyMeasurements, artifact: Artifact, *, environment: SandboxedEnvironment,
    plots: bool = True, drawn: dict[PlotData, bytes] | None = None,
) -> RenderedCard:
    manifest = inputs.manifest
    context, numbers, plot_data = build_context(inputs, measured, artifact)
    context["hardware"] = hardware_context(inputs, artifact)  # other hardware's ledgers, side by side
    body = render_body(environment, artifact.kind, context)
    data = frontmatter.card_data(manifest, measured, artifact)
    text = f"---\n{data.to_yaml()}\n---\n\n{body}"
    ModelCard(text, ignore_metadata_errors=False)  # the Hub's own parser must accept what we wrote
    files: dict[str, bytes] = {
        README: text.encode(),
        CFF: citation.cff(manifest, artifact).encode(),
        BIBTEX: citation.bibtex(manifest, artifact).encode(),
    }
    for name, content in frontmatter.eval_result_files(manifest, measured, artifact).items():
        files[name] = content.encode()
    for name, content in every_eval_ever.export_files(manifest, measured, artifact).items():
        files[name] = content.encode()
    if plots:
        cache = drawn if drawn is not None else {}
        for plot in plot_data:
            if plot not in cache:
                cache[plot] = draw(plot)
            files[plot.path] = cache[plot]
    return RenderedCard(artifact_id=artifact.id, files=files, numbers=tuple(numbers.rows))


def render_body(environment: SandboxedEnvironment, kind: str, context: Context) -> str:
    """The Markdown body for a card kind; a value the context lacks is a `CardError` naming it."""
    name = f"{kind}.md.j2"
    try:
        body = render_bounded(environment.get_template(name), context)
    except UndefinedError as exc:
        raise CardError(f"card template for {kind!r} artifacts needs a value the context lacks: {exc.message}",
                        hint="A family template override may use a name hfrelease does not provide; "
                        "see templates/cards/ for the names there are.") from exc
    except TemplateError as exc:
        raise CardError(f"card template {name!r} failed: {exc}",
                        hint="Check the family's templates/ overrides against templates/cards/.") from exc
    # Blank-line runs left by optional sections collapse to one: the Markdown is the same, diffs are calmer.
    lines: list[str] = []
    for line in body.splitlines():
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"


def card_dir(root: Path, artifact_id: str) -> Path:
    """Where an artifact's rendered card lives: `model_cards/<family>/<artifact-id>/`."""
    return root / artifact_id
