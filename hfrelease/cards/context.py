"""Manifest + measurements → the plain data a card template prints, assembled from the card's sections.

Each section is built in a module of its own over one `CardView` (`view.py`): the quality tables
(`quality_tables.py`), the speed tables (`speed_tables.py`), the draft sections (`draft_tables.py`),
the opening (`opening.py`), the headline (`headline.py`) and the choice table (`choose_table.py`,
`choice.py`), which summarise those
(`summary.py`), and the benchmark provenance (`benchmark_provenance.py`). The artifact's and family's
names, the quantization recipe, links and the hand-written sections are here. All number formatting
happens in those builders, never in a template.

The context is made of dicts, lists and `Markdown` strings only: templates do no arithmetic and no
formatting, and every string that came from a manifest or a ledger is escaped before it gets here (the
template environment escapes anything that is not `Markdown` anyway).
"""

from __future__ import annotations

import json

from hfrelease.cards import citation
from hfrelease.cards.benchmark_provenance import benchmark_provenance
from hfrelease.cards.changes import changes_context
from hfrelease.cards.choose_table import ChooseTable
from hfrelease.cards.commands import download_command, serving_context
from hfrelease.cards.draft_tables import DraftTables
from hfrelease.cards.fidelity import fidelity_context
from hfrelease.cards.headline import Headline
from hfrelease.cards.inputs import FAMILY, SECTION_NAMES, CardInputs
from hfrelease.cards.measurements import FamilyMeasurements
from hfrelease.cards.numbers import NumberRegistry
from hfrelease.cards.opening import Opening
from hfrelease.cards.plots import PlotData, plan_plots
from hfrelease.cards.quality_tables import QualityTables
from hfrelease.cards.speed_tables import SpeedTables
from hfrelease.cards.text import Markdown, code_block, code_span, escape_markdown, hub_url, link, prose
from hfrelease.cards.training import training_context
from hfrelease.cards.view import CardView, Context
from hfrelease.manifest import Artifact, Manifest


def build_context(
    inputs: CardInputs, measured: FamilyMeasurements, artifact: Artifact
) -> tuple[Context, NumberRegistry, list[PlotData]]:
    """The template context of `artifact`'s card, the numbers it prints, and the plots it shows."""
    manifest = inputs.manifest
    numbers = NumberRegistry()
    view = CardView(manifest, measured, numbers, artifact, inputs.sections)
    quality, speed = QualityTables(view), SpeedTables(view)
    drafts = DraftTables(view, speed)
    plots = plan_plots(manifest, measured, artifact)
    context: Context = {
        "artifact": _artifact(manifest, artifact),
        "family": _family(manifest),
        "headline": Headline(view, quality, speed, drafts).lines(artifact),
        "opening": Opening(view, quality, speed, drafts).sentences(artifact),
        "quality": quality.quality(artifact),
        "fidelity": fidelity_context(manifest, measured, numbers, artifact, shown=view.shown),
        "changes": changes_context(inputs.changes, numbers, artifact),
        "matrix": quality.matrix(artifact),
        "speed": speed.speed(artifact),
        "load": speed.load(artifact),
        "sweep": speed.sweep(artifact),
        "pairings": drafts.pairings(artifact),
        "acceptance": drafts.acceptance(artifact),
        "serving": serving_context(manifest, measured, artifact),
        "download": code_block(download_command(artifact), language="bash"),
        "creation": _creation(manifest, artifact),
        "training": training_context(inputs.manifest, artifact, inputs.files.get(artifact.id, {}),
                                     drafts.serving_acceptance(artifact)),
        "choose": ChooseTable(view, quality, speed, drafts).table(artifact),
        "provenance": benchmark_provenance(manifest, measured, artifact),
        "links": _links(manifest, artifact, view),
        "citation": {"bibtex": code_block(citation.bibtex(manifest, artifact), language="bibtex")},
        "sections": _sections(inputs, artifact),
        # Every kind present, None without data: a family whose reference has nothing to compare with (a
        # reference and a draft) has no quality plot, and the template asks for it by name.
    }
    # No plot without its table (issue 25): a plot whose section shows no measured table is neither shown nor
    # written, so plots/ never holds a figure the card's numbers do not back.
    plots = [p for p in plots if _has_table(context, p.kind)]
    context["plots"] = {**dict.fromkeys(("load", "acceptance", "quality")), **{p.kind: p.path for p in plots}}
    context["numbers"] = [
        {"id": code_span(r.id), "label": escape_markdown(r.label), "text": Markdown(r.text),
         "records": Markdown(", ".join(code_span(n) for n in r.records))}
        for r in numbers.rows
    ]
    age = numbers.date_range()
    # One date is said as one date: "measured between 2026-11-29 and 2026-11-29" reads like a typo.
    context["age"] = (None if not age else Markdown(f"on {age[0]}") if age[0] == age[1]
                      else Markdown(f"between {age[0]} and {age[1]}"))
    return context, numbers, plots


def _has_table(context: Context, kind: str) -> bool:
    """Whether the section a plot of `kind` belongs to shows its measured table."""
    section = context.get(kind)
    if kind == "quality":
        return bool(section)
    return isinstance(section, dict) and bool(section.get("measured"))


def _artifact(manifest: Manifest, artifact: Artifact) -> Context:
    reference = manifest.reference
    return {
        "id": escape_markdown(artifact.id),
        "kind": artifact.kind,
        "title": escape_markdown(artifact.title or artifact.repo.split("/")[1]),
        "repo": escape_markdown(artifact.repo),
        "link": link(artifact.repo, hub_url(artifact.repo)),
        "description": escape_markdown(artifact.description) if artifact.description else None,
        "published": artifact.publish,
        "reference_title": escape_markdown(reference.title or reference.repo),
        "scheme": code_span(artifact.quantization.scheme) if artifact.quantization else None,
        "target": _target_link(manifest, artifact),
    }


def _target_link(manifest: Manifest, artifact: Artifact) -> Markdown | None:
    if artifact.draft is None:
        return None
    target = manifest.artifact_by_id(artifact.draft.target)
    return link(target.title or target.repo, hub_url(target.repo))


def _family(manifest: Manifest) -> Context:
    family = manifest.family
    return {
        "display_name": escape_markdown(family.display_name),
        "base_model": link(family.base_model, hub_url(family.base_model)),
        "version": escape_markdown(family.version),
        "tag": escape_markdown(manifest.tag_name()),
        "collection": escape_markdown(family.collection) if family.collection else None,
    }


def _creation(manifest: Manifest, artifact: Artifact) -> Context | None:
    from hfrelease.files.rules import shipped_path

    q = artifact.quantization
    if q is None:
        return None
    args = [f"targets={json.dumps(q.targets)}", f"scheme={json.dumps(q.scheme)}"]
    if q.ignore:
        args.append(f"ignore={json.dumps(q.ignore)}")
    modifier = q.modifier or "QuantizationModifier"
    recipe = (f"from llmcompressor import oneshot\nfrom llmcompressor.modifiers.quantization import {modifier}\n\n"
              f"recipe = {modifier}({', '.join(args)})\n"
              + ("oneshot(model=MODEL, recipe=recipe)  # data-free" if q.data_free
                 # The calibration set on a line of its own: beside the call it made the block wider than the card.
                 else f"# CALIBRATION: {q.calibration or 'the calibration samples'}\n"
                      "oneshot(model=MODEL, dataset=CALIBRATION, recipe=recipe)"))
    return {
        "scheme": code_span(q.scheme), "format": code_span(q.format),
        "tool": escape_markdown(f"{q.tool} {q.tool_version}"),
        "modifier": code_span(modifier), "targets": code_span(", ".join(q.targets)),
        "ignore": code_span(", ".join(q.ignore)) if q.ignore else None,
        "data": escape_markdown("data-free" if q.data_free else (q.calibration or "calibrated")),
        # Where a reader finds it: its path in this repo, not the family's build path (issue 27).
        "recipe_file": code_span(shipped_path(manifest, artifact, q.recipe)) if q.recipe else None,
        "code": code_block(recipe, language="python"),
        "notes": escape_markdown(q.notes) if q.notes else None,
    }


def _links(manifest: Manifest, artifact: Artifact, view: CardView) -> Context:
    family = [{"name": view.name(a), "kind": escape_markdown(a.kind), "self": a.id == artifact.id,
               "published": a.publish} for a in manifest.artifact if view.shown(a)]
    tools = []
    if artifact.quantization:
        q = artifact.quantization
        tools.append(escape_markdown(f"Quantized with {q.tool} {q.tool_version} ({q.format} format)"))
    if artifact.draft and artifact.draft.trained_with:
        tools.append(escape_markdown(f"Trained with {artifact.draft.trained_with}"))
    return {"family": family, "tools": tools}


def _sections(inputs: CardInputs, artifact: Artifact) -> dict[str, Markdown]:
    family = inputs.sections.get(FAMILY, {})
    own = inputs.sections.get(artifact.id, {})
    # Hand-written text is marked as such, so the card lint can hold it to the card's own verdicts
    # (`lint/claims.py`): a comment on a line of its own, which the Hub does not show.
    found = {name: prose(own.get(name, family.get(name, ""))) for name in SECTION_NAMES}
    return {name: Markdown(f"<!-- hand:begin -->\n{text}\n<!-- hand:end -->") if text else text
            for name, text in found.items()}
