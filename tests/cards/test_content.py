"""What cards say: every seed section, "not measured" without speed records, strict missing values."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from card_fixtures import nanbeige_inputs

from hfrelease.cards import CardError, CardInputs, MissingMeasurementError, render_family
from hfrelease.cards.environment import card_environment
from hfrelease.cards.lint.numbers import SERVE
from hfrelease.cards.reproduce import unfold
from hfrelease.manifest import Manifest

# The section headings of the two hand-written seed cards (tests' specification of a card).
SEED_FP8 = ["Why FP8 and not 4-bit for this architecture", "Quality evals", "Speed", "Performance under load",
            "Serving (vLLM)", "Download", "Creation", "Limitations", "Which artifact should I choose?",
            "Full quality matrix vs", "Links & provenance", "Benchmark provenance", "Citation"]
SEED_EAGLE3 = ["The acceptance gap this fixes", "The looped-arch part (why this needed new wiring)", "Training",
               "Measured serving results", "Serving (vLLM)", "Download", "Limitations", "The family",
               "Links & provenance", "Citation"]


def _headings(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^#{1,3} (.+)$", text, re.M)]


def test_nanbeige_renders_five_cards_with_seed_sections(nanbeige: CardInputs) -> None:
    """The flagship manifest over a synthetic ledger renders all five cards with every seed section."""
    family = render_family(nanbeige, plots=False)
    assert [c.artifact_id for c in family.cards] == ["bf16", "fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16",
                                                     "eagle3"]
    fp8 = _headings(family.card("fp8-dynamic").readme)
    for heading in SEED_FP8:
        assert any(h.startswith(heading) for h in fp8), heading
    eagle = _headings(family.card("eagle3").readme)
    for heading in SEED_EAGLE3:
        assert any(h.startswith(heading) for h in eagle), heading
    for card in family.cards[1:4]:  # every quant card has the seed's quant sections
        headings = _headings(card.readme)
        assert all(any(h.startswith(s) for h in headings) for s in SEED_FP8[1:]), card.artifact_id


def test_choose_table_says_what_each_artifact_needs(nanbeige: CardInputs) -> None:
    """The seeds' "fits in ~7 GB at FP8" rule, from the records: weights as loaded + one 64k-token request's
    fp8 KV cache (12 GiB / 393,216 tokens = 32 KiB a token = 2 GiB), per artifact."""
    readme = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic").readme
    table = readme.split("| Artifact | Weights | Memory to serve | Peak RAM |")[1].split("<!--")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    serve = {title: cells[2] for title, cells in rows.items()}
    fp8 = next(v for t, v in serve.items() if "FP8-Dynamic" in t)
    assert fp8 == f"{round(4_900_000_000 / 2**30, 2) + 2.0:.2f} GiB" == "6.56 GiB"
    bf16 = next(v for t, v in serve.items() if "bf16" in t.lower() or t == "Nanbeige4.2-3B")
    assert float(bf16.split()[0]) > float(fp8.split()[0])  # the bf16 weights are bigger, the context the same
    assert "memory.fp8-dynamic.serve" in readme and "memory.fp8-dynamic.peak" in readme


def test_serving_command_is_the_measured_configuration(nanbeige: CardInputs) -> None:
    """The FP8 card prints the plugin install and the eagle3 command built by build_serve_command."""
    readme = render_family(nanbeige, plots=False, artifacts=["fp8-dynamic"]).cards[0].readme
    assert "pip install --no-deps ./Nanbeige4.2-3B-FP8-Dynamic/vllm_plugin" in readme
    assert "VLLM_ATTENTION_BACKEND=TRITON_ATTN" in readme
    # The card folds a command one flag per line and a JSON value one key per line; unfolded, it is the argv.
    commands = [unfold(block) for _, block in SERVE.findall(readme)]
    speculative = '{"method":"eagle3","num_speculative_tokens":3,"model":"NullSense/Nanbeige4.2-3B-EAGLE3"}'
    assert any(argv[i:i + 2] == ["--speculative-config", speculative] for argv in commands for i in range(len(argv)))
    assert "hf download NullSense/Nanbeige4.2-3B-FP8-Dynamic --local-dir Nanbeige4.2-3B-FP8-Dynamic" in readme


def test_training_section_shows_train_command(nanbeige: CardInputs) -> None:
    """The draft card shows train_command.txt verbatim and says val_metrics.json is not declared."""
    readme = render_family(nanbeige, plots=False, artifacts=["eagle3"]).cards[0].readme
    assert "--aux-hidden-state-layer-ids 3,23,41,44" in readme
    assert "No `val_metrics.json` is declared" in readme


def test_val_metrics_table(nanbeige: CardInputs) -> None:
    """speculators' per-epoch val_metrics.json files (<epoch>/val_metrics.json) become one table, epochs in order."""
    epoch = '{{"loss_epoch": {loss}, "full_acc_0_epoch": {a0}, "full_acc_1_epoch": {a1}, "cond_acc_0_epoch": {a0}, ' \
            '"cond_acc_1_epoch": {c1}}}'
    files = {"eagle3": {**nanbeige.files["eagle3"],
                        "eagle3/ckpt/1/val_metrics.json": epoch.format(loss=1.7, a0=0.622, a1=0.4, c1=0.643),
                        "eagle3/ckpt/0/val_metrics.json": epoch.format(loss=2.1, a0=0.58, a1=0.33, c1=0.569)}}
    inputs = CardInputs(manifest=nanbeige.manifest, records=nanbeige.records, sections=nanbeige.sections, files=files)
    readme = render_family(inputs, plots=False, artifacts=["eagle3"]).cards[0].readme
    assert "| Epoch | Loss | Acceptance by position | Conditional by position |" in readme
    assert readme.index("| 0 | 2.100 | 0.580 / 0.330 | 0.580 / 0.569 |") < readme.index("| 1 | 1.700 | 0.622 / 0.400 |")


def test_without_speed_records_says_not_measured(nanbeige_manifest: Manifest) -> None:
    """Absent speed records, speed/load/acceptance say "not measured" and no speed number is shown."""
    family = render_family(nanbeige_inputs(nanbeige_manifest, with_speed=False), plots=False)
    fp8 = family.card("fp8-dynamic").readme
    assert "Speed: not measured." in fp8 and "Load: not measured." in fp8
    assert "Acceptance: not measured." in family.card("eagle3").readme
    assert not any(row.id.startswith("speed.") for card in family.cards for row in card.numbers)


def test_missing_gate_record_fails_with_its_name(demo_inputs: CardInputs) -> None:
    """A gate the manifest promises but the ledger lacks stops the render, naming gate and artifact."""
    records = tuple(e for e in demo_inputs.records
                    if not (e.record.artifact_id == "w8a8-int8" and e.record.subject_id == "mc"))
    inputs = CardInputs(manifest=demo_inputs.manifest, records=records, sections=demo_inputs.sections)
    with pytest.raises(MissingMeasurementError, match="gate 'mc' on artifact 'w8a8-int8'"):
        render_family(inputs, plots=False)


def test_missing_template_value_is_named(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """StrictUndefined: a family partial using a value the context lacks fails with that name."""
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "limitations.md.j2").write_text("## Limitations\n\n{{ artifact.memory_gb }}\n")
    with pytest.raises(CardError, match="memory_gb"):
        render_family(demo_inputs, plots=False, environment=card_environment(tmp_path))


def test_family_partial_overrides_shared_one(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """A partial under the family's templates/ replaces the shared one in every card."""
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "limitations.md.j2").write_text("## Limitations\n\nOverridden for {{ artifact.id }}.\n")
    family = render_family(demo_inputs, plots=False, environment=card_environment(tmp_path))
    assert "Overridden for fp8-dynamic." in family.card("fp8-dynamic").readme


def test_void_gate_shows_void_not_a_number(demo_inputs: CardInputs) -> None:
    """A void gate record is shown as void with its reason, never as a value."""
    from hfrelease.cards import entry_for

    records = []
    for e in demo_inputs.records:
        if e.record.artifact_id == "w8a8-int8" and e.record.subject_id == "arith":
            void = e.record.model_copy(update={"status": "void", "void_reason": "12 of 50 answers were cut off"})
            records.append(entry_for(void, e.scores))
        else:
            records.append(e)
    inputs = CardInputs(manifest=demo_inputs.manifest, records=tuple(records), sections=demo_inputs.sections)
    card = render_family(inputs, plots=False, artifacts=["w8a8-int8"]).cards[0]
    assert "void: 12 of 50 answers were cut off" in card.readme
    assert not any(r.id == "gate.arith.w8a8-int8.value" for r in card.numbers)


def test_the_recipe_is_named_by_its_path_in_the_published_repo(nanbeige_manifest: Manifest) -> None:
    """A quant's recipe inside its checkpoint is cited as the repo holds it (`recipe.yaml` at its top), not by
    the family's build path `checkpoints/fp8-dynamic/recipe.yaml` (issue 27, part 5)."""
    build_path = "checkpoints/fp8-dynamic/recipe.yaml"

    def with_recipe(artifact: Any) -> Any:
        if artifact.id != "fp8-dynamic":
            return artifact
        source = artifact.source.model_copy(update={"hub": None, "revision": None, "path": "checkpoints/fp8-dynamic"})
        quantization = artifact.quantization.model_copy(update={"recipe": build_path})
        return artifact.model_copy(update={"source": source, "quantization": quantization})

    manifest = nanbeige_manifest.model_copy(update={"artifact": [with_recipe(a) for a in nanbeige_manifest.artifact]})
    readme = render_family(nanbeige_inputs(manifest, with_speed=False), plots=False).card("fp8-dynamic").readme
    assert "- Recipe: `recipe.yaml`" in readme and build_path not in readme


def test_a_speed_point_whose_outputs_end_early_is_labelled(nanbeige_manifest: Manifest) -> None:
    """A speed record whose answers averaged 2 of 256 tokens shows its tok/s labelled as mostly time to first
    token, the mean traced to its record like every number (issue 27, part 5); unlabelled as recorded."""
    from hfrelease.cards.inputs import entry_for

    inputs = nanbeige_inputs(nanbeige_manifest)
    shortened = []
    for entry in inputs.records:
        record = entry.record
        if record.kind == "speed" and record.artifact_id == "fp8-dynamic" and record.extra.get("concurrency") == 1:
            record = record.model_copy(update={"extra": {**record.extra, "mean_output_tokens": 2.0},
                                               "generation": {**record.generation, "output_len": 256}})
            shortened.append(entry_for(record, {}, ()))
        else:
            shortened.append(entry)
    family = render_family(CardInputs(manifest=inputs.manifest, records=tuple(shortened), sections=inputs.sections,
                                      files=inputs.files), plots=False)
    fp8 = family.card("fp8-dynamic")
    assert "short outputs: 2.0 tokens per answer, mostly time to first token" in fp8.readme
    assert any(row.id.endswith(".mean_output_tokens") for row in fp8.numbers)
    assert "short outputs" not in render_family(inputs, plots=False).card("fp8-dynamic").readme
