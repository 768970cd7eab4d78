"""A draft's card shows its draft-gate verdicts, judged as the release judges them, from its records."""

from __future__ import annotations

from card_fixtures import nanbeige_inputs

from hfrelease.cards import CardInputs, render_family
from hfrelease.manifest import Manifest


def _with_floor(manifest: Manifest, **thresholds: float) -> Manifest:
    artifacts = [a.model_copy(update={"draft": a.draft.model_copy(update=thresholds)}) if a.draft is not None else a
                 for a in manifest.artifact]
    return manifest.model_copy(update={"artifact": artifacts})


def test_eagle3_card_shows_its_measured_acceptance_and_a_pass(nanbeige: CardInputs) -> None:
    """No floor set: the acceptance measured on its target passes; other artifacts' points are not judged."""
    card = render_family(nanbeige, plots=False).card("eagle3").readme
    assert "**Draft gates: pass.**" in card
    assert "`hfrelease eval --artifact eagle3`" in card and "a draft that fails one is not published" in card
    rows = [line for line in card.splitlines() if "| acceptance rate |" in line]
    assert rows and all("on fp8-dynamic" in r and r.endswith("| `measured` | pass |") for r in rows)
    assert "| served with its target | `fp8-dynamic` | `target = fp8-dynamic` | pass |" in card
    assert "on bf16 | served with" not in card


def test_eagle3_card_shows_a_failed_floor(nanbeige_manifest: Manifest) -> None:
    """A floor above the measured acceptance: the card says fail, row by row."""
    manifest = _with_floor(nanbeige_manifest, min_acceptance_rate=0.9, min_speedup=1.1)
    card = render_family(nanbeige_inputs(manifest), plots=False).card("eagle3").readme
    assert "**Draft gates: fail.**" in card
    assert any("| acceptance rate |" in line and line.endswith("| `min_acceptance_rate = 0.9` | **fail** |")
               for line in card.splitlines())
    assert any("| speedup over no speculation |" in line and line.endswith("| `min_speedup = 1.1` | pass |")
               for line in card.splitlines())


def test_a_draft_card_without_speed_records_is_not_judged(nanbeige_manifest: Manifest) -> None:
    """No speed record: acceptance "not measured" and the draft gates "not judged" (not a pass)."""
    card = render_family(nanbeige_inputs(nanbeige_manifest, with_speed=False), plots=False).card("eagle3").readme
    assert "Acceptance: not measured." in card
    assert "Draft gates: not judged." in card and "Draft gates: pass" not in card


def test_a_family_of_a_reference_and_a_draft_renders(demo_manifest: Manifest, demo_inputs: CardInputs) -> None:
    """No quant to compare the reference with (so no quality plot): both cards render, the draft's judged."""
    from dataclasses import replace

    kept = {"reference", "draft"}
    manifest = demo_manifest.model_copy(update={
        "artifact": [a for a in demo_manifest.artifact if a.id in kept],
        # A gate that names only quants goes with them; one naming some keeps the kept ones.
        "gate": [g.model_copy(update={"artifacts": None if g.artifacts is None else [a for a in g.artifacts
                                                                                      if a in kept]})
                 for g in demo_manifest.gate if g.artifacts is None or kept & set(g.artifacts)],
        "speculative": [s for s in demo_manifest.speculative if s.draft in (None, "draft")],
        "workload": [w.model_copy(update={"speculative": [s for s in w.speculative if s in ("none", "draft")]})
                     for w in demo_manifest.workload if w.artifacts != ["fp8-dynamic"]]})
    records = tuple(e for e in demo_inputs.records if e.record.artifact_id in kept
                    and e.record.draft_artifact_id in (None, "draft"))
    family = render_family(replace(demo_inputs, manifest=manifest, records=records))
    assert [c.artifact_id for c in family.cards] == ["reference", "draft"]
    assert "**Draft gates: pass.**" in family.card("draft").readme


def test_a_draft_card_judges_the_speedup_at_every_point_as_the_release_does(nanbeige_manifest: Manifest) -> None:
    """The draft wins at batch 1 but one context-sweep point with it is planted at half its baseline: the card's
    speedup gate fails there, as `hfrelease.speed.drafts.judge_draft` fails it, and names the point (the card used
    to judge the batch-1 points only and said pass)."""
    from dataclasses import replace

    from hfrelease.ledger.record import Metric

    manifest = _with_floor(nanbeige_manifest, min_speedup=1.1)
    inputs = nanbeige_inputs(manifest)
    draft = manifest.artifact_by_id("eagle3").draft
    assert draft is not None
    sweep = [e for e in inputs.records if e.record.kind == "speed-sweep" and e.record.draft_artifact_id == "eagle3"
             and e.record.artifact_id == draft.target]
    assert sweep, "the synthetic family has a context sweep served with the EAGLE-3 head"
    longest = max(sweep, key=lambda e: e.record.extra["input_len"])
    base = next(e for e in inputs.records if e.record.kind == "speed-sweep" and e.record.extra.get("speculative")
                == "none" and e.record.artifact_id == longest.record.artifact_id
                and e.record.subject_id == longest.record.subject_id
                and e.record.extra["input_len"] == longest.record.extra["input_len"])
    slow = base.record.metrics["output_throughput"].value / 2
    planted = replace(longest, record=longest.record.model_copy(update={"metrics": {
        **longest.record.metrics, "output_throughput": Metric(value=slow)}}))
    records = tuple(planted if e is longest else e for e in inputs.records)
    card = render_family(replace(inputs, records=records), plots=False).card("eagle3").readme
    assert "**Draft gates: fail.**" in card
    length = longest.record.extra["input_len"]
    label = next(w.label for w in manifest.workload if w.id == longest.record.subject_id)
    row = next(line for line in card.splitlines() if "| speedup over no speculation |" in line
               and line.startswith(f"| {label}"))
    assert f"| 0.50\u00d7 at input {length} tokens |" in row and row.endswith("| `min_speedup = 1.1` | **fail** |")
