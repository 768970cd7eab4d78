"""Front matter the Hub keeps apart: one model-index result per gate, read back with huggingface_hub's own
parsers; dataset ids and benchmark task ids checked against lm-eval's own task definitions; `source.url` at
the evidence (the gate's Every Eval Ever record at the release tag), not at the card."""

from __future__ import annotations

from pathlib import Path

import pytest
from card_fixtures import ROOT
from huggingface_hub import EvalResult, metadata_load
from huggingface_hub.repocard_data import model_index_to_eval_results

from hfrelease.cards import CardInputs, render_family
from hfrelease.cards.evidence import EEE_DIR
from hfrelease.cards.frontmatter import BENCHMARKS, HUB_DATASETS, dataset_type, eval_result_files
from hfrelease.manifest import load_manifest

DEMO = ROOT / "model_cards" / "demo"


def _results(readme: Path) -> list[EvalResult]:
    metadata = metadata_load(readme)
    assert metadata is not None
    if "model-index" not in metadata:
        return []
    _, results = model_index_to_eval_results(metadata["model-index"])
    return results


def _exported_gates(card: Path) -> set[str]:
    """The gates whose Every Eval Ever records lie beside the card (data/{gate}/{owner}/{model}/)."""
    return {p.relative_to(card / EEE_DIR).parts[1] for p in (card / EEE_DIR).rglob("*.json")}


@pytest.mark.parametrize("card", sorted(p.parent.name for p in DEMO.glob("*/README.md")))
def test_each_gate_is_one_model_index_result_in_the_committed_cards(card: str) -> None:
    """Every committed demo card, read as the Hub reads it: one result per gate (huggingface_hub groups results
    by `unique_identifier`, one sidebar entry per group), `dataset.config` the gate id, the sampled gate with
    its seeds and n, and `source.url` at that gate's Every Eval Ever record in this repo at the release tag."""
    manifest = load_manifest(DEMO, check_files=False)
    artifact = manifest.artifact_by_id(card)
    results = _results(DEMO / card / "README.md")
    configs = [r.dataset_config for r in results]
    assert len({r.unique_identifier for r in results}) == len(results), f"two gates share one Hub entry: {configs}"
    assert set(configs) == _exported_gates(DEMO / card), "a gate without its record, or a record without its gate"
    for result in results:
        gate = next(g for g in manifest.gate if g.id == result.dataset_config)
        assert result.dataset_type == dataset_type(gate)
        assert result.dataset_args is not None and result.dataset_args["n"] >= 1
        if gate.seeds is not None:
            assert result.dataset_args["seeds"] == gate.seeds and result.dataset_args["n"] == gate.limit
        prefix = f"https://huggingface.co/{artifact.repo}/blob/{manifest.tag_name()}/{EEE_DIR}/data/{gate.id}/"
        assert result.source_url is not None and result.source_url.startswith(prefix)
        assert (DEMO / card / result.source_url.split(f"/blob/{manifest.tag_name()}/", 1)[1]).is_file()


def test_each_gate_is_one_model_index_result_in_a_render(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """The same from a fresh render of the recorded ledger: no two gates of a card merge on the Hub."""
    family = render_family(demo_inputs, plots=False)
    gates = {g.id for g in demo_inputs.manifest.gate if not g.is_fidelity}
    for card in family.cards:
        readme = tmp_path / f"{card.artifact_id}.md"
        readme.write_bytes(card.files["README.md"])
        results = _results(readme)
        if not results:
            continue
        assert len({r.unique_identifier for r in results}) == len(results)
        assert {r.dataset_config for r in results} <= gates
        assert all(r.source_url and "/every_eval_ever/" in r.source_url for r in results)


def _task_index() -> dict[str, object]:
    from lm_eval.tasks import TaskManager

    return TaskManager().task_index  # type: ignore[no-any-return]


def _leaves(index: dict[str, object], name: str) -> list[dict[str, object]]:
    """The configs of the tasks `name` runs (itself, or a group's tasks, recursively)."""
    entry = index[name]
    cfg = entry.cfg or {}  # type: ignore[attr-defined]
    if entry.kind.name in ("TASK", "PY_TASK"):  # type: ignore[attr-defined]
        return [cfg]
    found = []
    for member in cfg.get("task", []):
        member_name = member if isinstance(member, str) else member.get("task")
        found += _leaves(index, member_name)
    return found


def test_hub_dataset_ids_are_what_the_lm_eval_tasks_load() -> None:
    """Each task's Hub dataset id is the `dataset_path` of lm-eval's own task YAML (every task of a group), and
    each `.eval_results` benchmark is the dataset its task loads, its task id the configuration it loads."""
    index = _task_index()
    for task, dataset in HUB_DATASETS.items():
        assert task in index, f"lm-eval has no task {task!r}"
        paths = {str(cfg.get("dataset_path")) for cfg in _leaves(index, task)}
        assert paths == {dataset}, f"{task} loads {paths}, not {dataset}"
    for task, (dataset, task_id) in BENCHMARKS.items():
        assert HUB_DATASETS[task] == dataset
        names = {str(cfg.get("dataset_name")) for cfg in _leaves(index, task)}
        assert dataset != "Idavidrein/gpqa" or names == {f"gpqa_{task_id}"}, f"{task} loads {names}"


def test_eval_results_name_only_a_benchmark_the_task_loads(demo_inputs: CardInputs) -> None:
    """A gate on lm-eval's aime24 (Maxwell-Jia/AIME_2024) is not an entry on another AIME benchmark's
    leaderboard, and a full GPQA diamond gate is one on Idavidrein/gpqa's, its source the gate's record."""
    from hfrelease.cards.measurements import measure_family

    manifest = demo_inputs.manifest
    measured = measure_family(demo_inputs)
    artifact = manifest.artifact_by_id("fp8-dynamic")
    for task, expected in (("aime24", None), ("gpqa_diamond_cot_zeroshot", "Idavidrein/gpqa")):
        gate = manifest.gate[0].model_copy(update={"task": task, "limit": None})
        swapped = manifest.model_copy(update={"gate": [gate, *manifest.gate[1:]]})
        files = eval_result_files(swapped, measured, artifact)
        entry = files.get(f".eval_results/{gate.id}.yaml")
        if expected is None:
            assert entry is None
        else:
            assert entry is not None and f"id: {expected}" in entry and "task_id: diamond" in entry
            assert f"/blob/{manifest.tag_name()}/{EEE_DIR}/data/{gate.id}/" in entry
