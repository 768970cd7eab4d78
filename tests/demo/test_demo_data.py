"""Fast checks of the demo family's deterministic data and the files committed from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from hfrelease.demo import data
from hfrelease.demo.family_files import REPO_FAMILY_DIR, family_files, write_family_files
from hfrelease.demo.tokenizer import CHAT_TEMPLATE, assistant_target

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
FAMILY_DIR = REPO_ROOT / REPO_FAMILY_DIR


def _jsonl(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_generators_are_deterministic() -> None:
    """Two calls of every generator give identical output."""
    assert data.training_corpus() == data.training_corpus()
    assert family_files(tasks_dir="x") == family_files(tasks_dir="x")


def test_committed_files_match_generator() -> None:
    """The files under model_cards/demo are byte-for-byte what the generator writes."""
    expected = family_files(tasks_dir=f"{REPO_FAMILY_DIR}/tasks")
    for rel, content in expected.items():
        path = FAMILY_DIR / rel
        assert path.is_file(), f"{path} missing: run write_family_files({FAMILY_DIR})"
        assert path.read_text(encoding="utf-8") == content, f"{rel} is stale"


def test_arith_answers_are_correct() -> None:
    """Every demo_arith answer is the value of its question."""
    rows = _jsonl(data.to_jsonl(data.arith_rows()))
    assert len(rows) == 100
    assert len({r["question"] for r in rows}) == 100
    for row in rows:
        a, op, b = str(row["question"]).removeprefix("What is ").removesuffix("?").split()
        value = int(a) + int(b) if op == "+" else int(a) - int(b)
        assert row["answer"] == str(value)


def test_mc_gold_is_item_color() -> None:
    """Each demo_mc row's gold choice is the item's color, and it agrees with the JSON gate rows."""
    colors = data.item_colors()
    for mc, js in zip(data.mc_rows(), data.json_rows(), strict=True):
        choices = mc["choices"]
        assert isinstance(choices, list) and isinstance(mc["gold"], int)
        assert choices[mc["gold"]] == colors[int(str(mc["id"]))]
        assert js["expected"] == {"item": mc["id"], "color": choices[mc["gold"]]}
        assert data.json_answer(int(str(mc["id"])), colors[int(str(mc["id"]))]) == json.dumps(js["expected"])


def test_eval_questions_are_trained_on() -> None:
    """Every eval question and workload prompt appears in the training corpus (overfit by design)."""
    corpus = data.training_corpus()
    prompts = {c.prompt for c in corpus.chats}
    asked = [str(r["question"]) for r in data.arith_rows()]
    asked += [str(r["prompt"]) for r in data.json_rows()]
    asked += [str(r["prompt"]) for r in data.chat_workload_rows()]
    asked += [str(r["prompt"]) for r in data.longdoc_workload_rows()]
    assert set(asked) <= prompts
    texts = set(corpus.texts)
    for row in data.mc_rows():
        choices = row["choices"]
        assert isinstance(choices, list) and isinstance(row["gold"], int)
        assert f"{row['query']} {choices[row['gold']]}." in texts


def test_workloads_have_vllm_custom_fields() -> None:
    """Speed workload rows carry the 'prompt' and integer 'output_tokens' vllm bench custom reads."""
    for rows in (data.chat_workload_rows(), data.longdoc_workload_rows()):
        assert rows
        for row in rows:
            assert isinstance(row["prompt"], str) and row["prompt"]
            assert isinstance(row["output_tokens"], int) and row["output_tokens"] > 0


def test_longdoc_answers_are_verbatim_prompt_spans() -> None:
    """A long-document prompt contains the text its trained answer copies."""
    for text in data.passages():
        assert text in data.repeat_prompt(text)
        assert len(text.split()) >= 20


@pytest.mark.parametrize("name", ["demo_arith", "demo_arith_nothink", "demo_mc"])
def test_task_yaml_parses_and_points_at_data(name: str, tmp_path: Path) -> None:
    """Each task YAML parses, names itself, and its data file exists where it says (absolute form)."""
    write_family_files(tmp_path, absolute=True)
    cfg = yaml.safe_load((tmp_path / "tasks" / f"{name}.yaml").read_text(encoding="utf-8"))
    assert cfg["task"] == name
    assert cfg["dataset_path"] == "json"
    data_file = Path(cfg["dataset_kwargs"]["data_files"]["test"])
    assert data_file.is_absolute() and data_file.is_file()
    assert _jsonl(data_file.read_text(encoding="utf-8"))


def test_committed_task_yaml_paths_are_repo_relative() -> None:
    """The committed YAMLs name their data relative to the repository root, where it exists."""
    for yaml_path in sorted((FAMILY_DIR / "tasks").glob("*.yaml")):
        cfg = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
        rel = Path(cfg["dataset_kwargs"]["data_files"]["test"])
        assert not rel.is_absolute()
        assert (REPO_ROOT / rel).is_file()


def test_nothink_task_disables_thinking() -> None:
    """Only demo_arith_nothink sends enable_thinking=false to the chat template."""
    files = family_files(tasks_dir="t")
    think = yaml.safe_load(files["tasks/demo_arith.yaml"])
    nothink = yaml.safe_load(files["tasks/demo_arith_nothink.yaml"])
    assert "chat_template_kwargs" not in think["generation_kwargs"]
    assert nothink["generation_kwargs"]["chat_template_kwargs"] == {"enable_thinking": False}


def test_answer_filter_strips_reasoning() -> None:
    """The demo_arith regex filter keeps only what follows </think>."""
    import re

    cfg = yaml.safe_load(family_files(tasks_dir="t")["tasks/demo_arith.yaml"])
    pattern = re.compile(cfg["filter_list"][0]["filter"][0]["regex_pattern"])
    assert pattern.findall("<think>\n7 + 5 = 12\n</think>\n\n12")[0].strip() == "12"
    assert pattern.findall("12")[0].strip() == "12"
    assert pattern.findall("\n7 + 5 = 12\n</think>\n\n 12 \n")[0].strip() == "12"


def test_chat_template_thinking_modes() -> None:
    """The template opens an empty think block only when enable_thinking is false."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = ImmutableSandboxedEnvironment().from_string(CHAT_TEMPLATE)
    messages = [{"role": "user", "content": "What is 7 + 5?"}]
    think = template.render(messages=messages, add_generation_prompt=True)
    nothink = template.render(messages=messages, add_generation_prompt=True, enable_thinking=False)
    assert think == "<|im_start|>user\nWhat is 7 + 5?<|im_end|>\n<|im_start|>assistant\n"
    assert nothink == think + "<think>\n\n</think>\n\n"
    trained = assistant_target(reasoning="7 + 5 = 12", answer="12", thinking=True)
    assert trained == "<think>\n7 + 5 = 12\n</think>\n\n12<|im_end|>"
    history = [*messages, {"role": "assistant", "content": trained.removesuffix("<|im_end|>")}]
    rendered = template.render(messages=history, add_generation_prompt=False)
    # Earlier turns drop their reasoning, as Qwen3's template does.
    assert rendered.endswith("<|im_start|>assistant\n12<|im_end|>\n")


def test_the_demo_drafts_identical_outputs_bound_leaves_a_near_tie_on_every_workload() -> None:
    """The identical-outputs gate is judged on each workload's own prompts: on every workload serving the demo's
    draft (and the release rehearsal's 8 chat prompts) its bound must let at least one prompt differ, or one
    near-tie flipped by a kernel path not measured yet fails a good draft; a lossy verifier changing
    half the prompts must still fail it."""
    import math
    import tomllib

    manifest = tomllib.loads((FAMILY_DIR / "release.toml").read_text())
    bound = next(a["draft"]["min_identical_outputs"] for a in manifest["artifact"] if a["id"] == "draft")
    sizes = {"rehearsal chat": 8}
    for workload in manifest["workload"]:
        if "draft" in workload["speculative"]:
            lines = len((FAMILY_DIR / workload["prompts"]).read_text().splitlines())
            sizes[workload["id"]] = min(lines, workload.get("num_prompts", lines))
    assert sizes.keys() == {"rehearsal chat", "chat", "longdoc", "context"}
    for name, n in sizes.items():
        allowed = n - math.ceil(bound * n - 1e-9)  # prompts that may differ with the share still >= bound
        assert allowed >= 1, (name, n, bound)
    assert bound > 0.5  # half the prompts changed fails
