"""Front matter round-trips through huggingface_hub; BibTeX parses; CITATION.cff validates against CFF 1.2.0."""

from __future__ import annotations

import json

import bibtexparser
import jsonschema
import pytest
import yaml
from card_fixtures import CFF_SCHEMA
from huggingface_hub import ModelCard

from hfrelease.cards import CardInputs, render_family


@pytest.fixture(scope="module")
def demo_cards(demo_inputs: CardInputs) -> dict[str, dict[str, bytes]]:
    return {c.artifact_id: dict(c.files) for c in render_family(demo_inputs, plots=False).cards}


@pytest.fixture(scope="module")
def nanbeige_cards(nanbeige: CardInputs) -> dict[str, dict[str, bytes]]:
    return {c.artifact_id: dict(c.files) for c in render_family(nanbeige, plots=False).cards}


def test_front_matter_round_trips_with_model_index(demo_cards: dict[str, dict[str, bytes]]) -> None:
    """The quant card's front matter parses back with the expected keys and one model-index result per gate."""
    data = ModelCard(demo_cards["fp8-dynamic"]["README.md"].decode()).data
    assert data.license == "apache-2.0" and data.language == ["en"] and data.library_name == "transformers"
    assert data.base_model == "hfrelease-demo/tiny-reference"
    assert data.to_dict()["base_model_relation"] == "quantized"
    assert data.pipeline_tag == "text-generation" and "quantized" in (data.tags or [])
    results = data.eval_results or []
    # arith and its sampled run (three seeds) both score demo_arith
    assert [r.dataset_type for r in results] == ["demo_arith", "demo_arith", "demo_arith_nothink", "demo_mc", "json"]
    # Points, as the card's tables print them (one value scale), under Hub-style metric ids.
    assert all(r.verified is False and 1 < r.metric_value <= 100 for r in results)
    assert [r.metric_type for r in results] == ["exact_match", "exact_match", "exact_match", "acc",
                                                     "json_match_rate"]


def test_draft_and_reference_relations(demo_cards: dict[str, dict[str, bytes]],
                                       nanbeige_cards: dict[str, dict[str, bytes]]) -> None:
    """Every draft is an adapter of its target, relation explicit; the reference that is the base model has none."""
    eagle = ModelCard(nanbeige_cards["eagle3"]["README.md"].decode()).data.to_dict()
    assert eagle["base_model"] == "NullSense/Nanbeige4.2-3B-FP8-Dynamic" and eagle["base_model_relation"] == "adapter"
    draft = ModelCard(demo_cards["draft"]["README.md"].decode()).data.to_dict()
    assert draft["base_model"] == "hfrelease-demo/tiny-reference" and draft["base_model_relation"] == "adapter"
    reference = ModelCard(demo_cards["reference"]["README.md"].decode()).data.to_dict()
    assert "base_model" not in reference and reference["model-index"]


def test_eval_results_only_for_full_benchmarks(nanbeige_cards: dict[str, dict[str, bytes]]) -> None:
    """GPQA-diamond (full set, a Hub Benchmark) gets a .eval_results file; subset gates (GSM8K n=100) do not."""
    files = nanbeige_cards["fp8-dynamic"]
    names = sorted(n for n in files if n.startswith(".eval_results/"))
    assert names == [".eval_results/gpqa-diamond.yaml"]
    (entry,) = yaml.safe_load(files[names[0]])
    assert entry["dataset"] == {"id": "Idavidrein/gpqa", "task_id": "diamond"}
    assert 0 <= entry["value"] <= 100
    # The evidence, not the card: the gate's Every Eval Ever record in the repo at the release tag.
    prefix = "https://huggingface.co/NullSense/Nanbeige4.2-3B-FP8-Dynamic/blob/v1.3/every_eval_ever/data/gpqa-diamond/"
    assert entry["source"]["url"].startswith(prefix) and entry["source"]["url"].endswith(".json")
    assert entry["source"]["url"].split("/blob/v1.3/", 1)[1] in files


@pytest.mark.parametrize("family", ["demo", "nanbeige"])
def test_bibtex_parses(family: str, demo_cards: dict[str, dict[str, bytes]],
                       nanbeige_cards: dict[str, dict[str, bytes]]) -> None:
    """Every card's citation.bib parses with bibtexparser, with the manifest's keys and fields."""
    cards = demo_cards if family == "demo" else nanbeige_cards
    for artifact_id, files in cards.items():
        library = bibtexparser.parse_string(files["citation.bib"].decode())
        assert not library.failed_blocks, artifact_id
        assert library.entries and all(e.entry_type == "misc" for e in library.entries)
        assert all({"author", "title", "year"} <= set(e.fields_dict) for e in library.entries)
    eagle = bibtexparser.parse_string(nanbeige_cards["eagle3"]["citation.bib"].decode()).entries[0]
    assert eagle.key == "peciukonis2026nanbeige42eagle3"
    assert eagle.fields_dict["author"].value == r"Pe{\v{c}}iukonis, Matas (NullSense)"


@pytest.mark.parametrize("family", ["demo", "nanbeige"])
def test_cff_validates(family: str, demo_cards: dict[str, dict[str, bytes]],
                       nanbeige_cards: dict[str, dict[str, bytes]]) -> None:
    """Every CITATION.cff is valid against the CFF 1.2.0 JSON schema (a fixture copy)."""
    schema = json.loads(CFF_SCHEMA.read_text())
    cards = demo_cards if family == "demo" else nanbeige_cards
    for files in cards.values():
        jsonschema.Draft7Validator(schema).validate(yaml.safe_load(files["CITATION.cff"]))
