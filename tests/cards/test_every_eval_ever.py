"""The gates' Every Eval Ever records: written beside each card by render, valid against that project's own
JSON schemas (0.3.0, tests/fixtures/every_eval_ever/, the package is not installed: SOURCE.md there), and
saying what the card says: the score, its uncertainty, the samples it was computed from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from card_fixtures import ROOT

from hfrelease.cards import CardInputs, render_family
from hfrelease.cards.every_eval_ever import SCHEMA_VERSION

SCHEMAS = ROOT / "tests" / "fixtures" / "every_eval_ever"
DEMO = ROOT / "model_cards" / "demo"


def _validator(name: str) -> jsonschema.Draft7Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    assert schema["version"] == SCHEMA_VERSION == "0.3.0"
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _problems(validator: jsonschema.Draft7Validator, data: Any, where: str) -> list[str]:
    return [f"{where}: {'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


def _check_card(files: dict[str, bytes], where: str) -> list[dict[str, Any]]:
    """Every record and row of one card valid against the schemas; each record's samples file is the one it
    names (path, sha256, rows); returns the aggregate records."""
    aggregate, instance = _validator("eval.schema.json"), _validator("instance_level_eval.schema.json")
    problems, records = [], []
    for name, content in sorted(files.items()):
        if not name.startswith("every_eval_ever/") or not name.endswith(".json"):
            continue
        record = json.loads(content)
        records.append(record)
        problems += _problems(aggregate, record, f"{where}/{name}")
        detail = record["detailed_evaluation_results"]
        samples = files[f"every_eval_ever/{detail['file_path']}"]
        assert hashlib.sha256(samples).hexdigest() == detail["checksum"]
        rows = [json.loads(line) for line in samples.decode().splitlines()]
        assert len(rows) == detail["total_rows"] > 0
        for row in rows:
            problems += _problems(instance, row, f"{where}/{detail['file_path']}")
            assert row["evaluation_id"] == record["evaluation_id"]
            assert row["evaluation_result_id"] == record["evaluation_results"][0]["evaluation_result_id"]
    assert not problems, "\n".join(problems[:20])
    return records


def test_rendered_records_validate_and_state_the_score_with_its_uncertainty(demo_inputs: CardInputs) -> None:
    """Each card of the recorded demo ledger exports one record per measured accuracy gate: valid, with the
    gate's value as the score, its standard error, a 95 % bootstrap interval around it, n and the resample
    count, the generation settings, lm-eval and its version, and one instance row per sample."""
    family = render_family(demo_inputs, plots=False)
    manifest = demo_inputs.manifest
    for card in family.cards:
        records = _check_card(dict(card.files), card.artifact_id)
        artifact = manifest.artifact_by_id(card.artifact_id)
        expected = {g.id for g in manifest.gate if not g.is_fidelity} if artifact.kind != "draft" else set()
        assert {r["evaluation_results"][0]["evaluation_result_id"] for r in records} == expected
        for record in records:
            result = record["evaluation_results"][0]
            gate = next(g for g in manifest.gate if g.id == result["evaluation_result_id"])
            score = result["score_details"]["score"]
            uncertainty = result["score_details"]["uncertainty"]
            assert record["model_info"]["id"] == artifact.repo
            # every demo task has 100 items; a gate with `limit` scores that many (the sampled arithmetic gate, 30)
            assert uncertainty["num_samples"] == (gate.limit or 100) and uncertainty["num_bootstrap_samples"] == 10_000
            interval = uncertainty["confidence_interval"]
            assert interval["lower"] <= score <= interval["upper"] and interval["confidence_level"] == 0.95
            assert "standard_error" in uncertainty
            assert result["generation_config"]["generation_args"]["max_tokens"] == gate.max_tokens
            library = record["eval_library"]
            assert (library["name"], library["version"]) == (
                ("lm_eval", "0.4.13") if gate.task else ("hfrelease custom gate", library["version"])
            )


def test_the_undertrained_score_interval_is_its_own(demo_inputs: CardInputs) -> None:
    """The interval is around this artifact's score (not the delta's against the reference): the under-trained
    variant's arithmetic interval lies far below the reference's."""
    family = render_family(demo_inputs, plots=False, artifacts=["reference", "undertrained"])

    def interval(artifact_id: str) -> tuple[float, float]:
        card = family.card(artifact_id)
        [record] = [json.loads(v) for k, v in card.files.items() if "/data/arith/" in k and k.endswith(".json")]
        ci = record["evaluation_results"][0]["score_details"]["uncertainty"]["confidence_interval"]
        return ci["lower"], ci["upper"]

    assert interval("undertrained")[1] < interval("reference")[0]


@pytest.mark.parametrize("card", sorted(p.parent.name for p in DEMO.glob("*/README.md")))
def test_committed_demo_records_validate(card: str) -> None:
    """The committed demo cards' records (their sampled gate too: three seeds, 30 items each) validate, and a
    sampled gate's rows are one per item per seed."""
    directory = DEMO / card
    files = {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in (directory / "every_eval_ever").rglob("*")
        if p.is_file()
    }
    records = _check_card(files, card)
    for record in records:
        result = record["evaluation_results"][0]
        if result["evaluation_result_id"] == "arith-sampled":
            assert result["generation_config"]["additional_details"]["seeds"] == "1, 2, 3"
            assert record["detailed_evaluation_results"]["total_rows"] == 90
            assert result["score_details"]["uncertainty"]["num_samples"] == 30


def test_a_record_the_render_no_longer_makes_is_removed(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """Writing a render removes an older record (nested folders included), so no orphan record ships."""
    from hfrelease.cards.write import apply_changes, plan_changes

    family = render_family(demo_inputs, plots=False, artifacts=["fp8-dynamic"])
    stale = tmp_path / "fp8-dynamic" / "every_eval_ever" / "data" / "gone" / "o" / "m" / "x.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n")
    apply_changes(plan_changes(family, tmp_path))
    assert not stale.exists() and not (tmp_path / "fp8-dynamic" / "every_eval_ever" / "data" / "gone").exists()
    written = {
        p.relative_to(tmp_path / "fp8-dynamic").as_posix()
        for p in (tmp_path / "fp8-dynamic" / "every_eval_ever").rglob("*")
        if p.is_file()
    }
    assert written == {k for k in family.cards[0].files if k.startswith("every_eval_ever/")}
