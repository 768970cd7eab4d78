"""Fixtures of the tests that run a gate against a fake server (tests/evaluation, tests/cli): the fixture family
with one real lm-eval gate, and fake OpenAI servers.

A plugin registered by tests/conftest.py, so that every folder finds them.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.fake_openai import FakeOpenAI

QUESTIONS = 20  # the gate's samples: at max_truncated 0.05 one failed request is allowed, two are not

TASK = """\
task: fault_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: "{data}"
test_split: test
output_type: generate_until
doc_to_text: question
doc_to_target: answer
generation_kwargs:
  until: ["<|im_end|>"]
  max_gen_toks: 8
  temperature: 0.0
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


@pytest.fixture
def gate_family(fixture_family: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture family with fake weights and one lm-eval gate `arith` (20 additions, exact match)."""
    for checkpoint in (fixture_family / "checkpoints").iterdir():
        (checkpoint / "model.safetensors").write_bytes(checkpoint.name.encode())
    data = fixture_family / "tasks" / "fault_arith.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)}) + "\n"
                            for i in range(QUESTIONS)))  # fmt: skip
    (fixture_family / "tasks" / "fault_arith.yaml").write_text(TASK.format(data=data))
    path = fixture_family / "release.toml"
    manifest = tomllib.loads(path.read_text())
    manifest["gate"] = [{"id": "arith", "task": "fault_arith", "task_dir": "tasks", "mode": "non-thinking",
                         "limit": QUESTIONS, "max_tokens": 8, "metric": "exact_match,none", "margin": 0.05,
                         "num_concurrent": 4}]  # fmt: skip
    path.write_text(tomli_w.dumps(manifest))
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "hfrelease-cache"))
    from hfrelease.evaluation import records

    monkeypatch.setattr(records, "hardware", dict)  # would ask nvidia-smi
    _index_only_the_gate_tasks(monkeypatch)
    return fixture_family


def _index_only_the_gate_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval's task manager indexes only the family's task directory, not its ~15,000 own tasks (8-17 s a
    run on this machine): the gate's task is local, so what runs is the same."""
    import lm_eval.tasks

    real = lm_eval.tasks.TaskManager

    def local_only(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **{**kwargs, "include_defaults": False})

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", local_only)


@pytest.fixture
def fake_server() -> Iterator[type[FakeOpenAI]]:
    """Start fake servers with `fake_server(model, mode=...).start()`; every one is stopped afterwards."""
    started: list[FakeOpenAI] = []

    class Tracked(FakeOpenAI):
        def start(self) -> FakeOpenAI:
            started.append(self)
            return super().start()

    yield Tracked
    for server in started:
        server.stop()
