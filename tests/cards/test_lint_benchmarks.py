"""`.eval_results` task ids held to each benchmark's own eval definition (issue 25, part 3): the Hub files a
result under a Benchmark's leaderboard by the task id its `eval.yaml` defines. Planted definitions on the
built-in Hub (huggingface_hub's real client reads them): an id the definition lacks, and a dataset with no
definition at all, are problems naming the gate; an unreachable Hub leaves the id unchecked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from huggingface_hub import HfApi

from hfrelease.cards.lint.benchmarks import benchmark_tasks, eval_result_tasks
from hfrelease.hub import HubServer, serve
from tests.hub_fixtures import TOKEN

DEFINITION = b"""name: Planted GPQA
description: a planted benchmark definition
tasks:
  - id: diamond
    config: gpqa_diamond
    split: train
  - id: main
    config: gpqa_main
    split: train
"""


@pytest.fixture
def hub(tmp_path: Path, isolated_hub_client: None) -> Iterator[HubServer]:
    """The built-in Hub, the only one huggingface_hub talks to."""
    server = serve(tmp_path / "hub", tokens=[TOKEN])
    yield server
    server.shutdown()


def _card(tmp_path: Path, results: dict[str, tuple[str, str]]) -> Path:
    """A card directory whose .eval_results/<gate>.yaml name (dataset id, task id)."""
    folder = tmp_path / "card" / ".eval_results"
    folder.mkdir(parents=True)
    for gate, (dataset, task_id) in results.items():
        entry = [{"dataset": {"id": dataset, "task_id": task_id}, "value": 41.2, "date": "2026-12-02T10:00:00Z"}]
        (folder / f"{gate}.yaml").write_text(yaml.safe_dump(entry, sort_keys=False), encoding="utf-8")
    return folder.parent


def test_task_ids_are_held_to_the_benchmarks_eval_yaml(hub: HubServer, tmp_path: Path) -> None:
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("planted/gpqa", repo_type="dataset")
    api.upload_file(path_or_fileobj=DEFINITION, path_in_repo="eval.yaml", repo_id="planted/gpqa", repo_type="dataset")
    api.create_repo("planted/plain-data", repo_type="dataset")
    card = _card(tmp_path, {"gpqa-full": ("planted/gpqa", "diamond"),
                            "gpqa-lm-eval-name": ("planted/gpqa", "gpqa_diamond"),
                            "plain": ("planted/plain-data", "default")})
    problems = eval_result_tasks(card, endpoint=hub.url)
    assert len(problems) == 2, problems
    wrong, plain = sorted(problems)
    assert "gate 'gpqa-lm-eval-name'" in wrong and "task_id 'gpqa_diamond' is not a task of planted/gpqa's eval.yaml" \
        in wrong and "(its tasks: diamond, main)" in wrong
    assert "gate 'plain'" in plain and "planted/plain-data has no eval.yaml" in plain


def test_offline_the_ids_are_left_unchecked(monkeypatch: pytest.MonkeyPatch, hub: HubServer,
                                            tmp_path: Path) -> None:
    """Offline (HF_HUB_OFFLINE) with nothing cached for this dataset: no definition to hold the id to, and no
    problem made up; the same card online is caught."""
    import huggingface_hub.constants

    card = _card(tmp_path, {"gpqa-lm-eval-name": ("planted/never-cached", "gpqa_diamond")})
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert eval_result_tasks(card, endpoint=hub.url) == []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    benchmark_tasks.cache_clear()  # what one process learnt offline, a later process online asks again
    assert "planted/never-cached has no eval.yaml" in eval_result_tasks(card, endpoint=hub.url)[0]
