"""A reader can re-run a card's figures (issue 25, part 6): prompts named by their path in the published repo,
each gate's `lm_eval` and each workload's `vllm bench serve` command, a supported-hardware line, and commands
folded one flag per line, none wider than the card column."""

from __future__ import annotations

import re

import pytest

from hfrelease.bundle.rules import prompt_repo_path, shipped_prompts
from hfrelease.cards.reproduce import COLUMN_CHARS, MAX_LINE, fold, unfold
from hfrelease.manifest import load_manifest
from tests.conftest import ROOT

DEMO = ROOT / "model_cards" / "demo"
CARDS = ["reference", "fp8-dynamic", "w8a8-int8", "undertrained", "draft"]


def test_fold_spreads_json_and_unfold_gives_back_the_argv() -> None:
    argv = ["vllm", "serve", "org/model", "--max-model-len", "1024", "--speculative-config",
            '{"method":"draft_model","num_speculative_tokens":3,"model":"hfrelease-demo/tiny-draft"}']
    text = fold(argv)
    assert all(len(line) <= MAX_LINE for line in text.splitlines()), text
    assert text.count("\\\n") == 2 and '"num_speculative_tokens": 3,' in text
    assert unfold(text) == argv


@pytest.mark.parametrize("card", CARDS)
def test_the_committed_cards_can_be_rerun(card: str) -> None:
    text = (DEMO / card / "README.md").read_text(encoding="utf-8")
    assert "../../build" not in text.split("## Benchmark provenance")[1].split("- **JSON answers**")[0]
    assert "prompts `prompts/chat.jsonl` (in this repo)" in text
    assert "Supported hardware: " in text
    commands = text.split("<summary>Re-run these figures")[1].split("</details>")[0]
    assert commands.count("lm_eval \\\n") == (4 if card != "draft" else 0)  # the four lm-eval gates
    assert commands.count("vllm bench serve \\\n") == 4  # chat, longdoc, load, context
    assert "--dataset-path prompts/longdoc.jsonl" in commands
    code = re.findall(r"^```bash\n(.*?)^```$", text, flags=re.S | re.M)
    wide = [line for block in code for line in block.splitlines() if len(line) > COLUMN_CHARS]
    assert not wide, wide


def test_the_bundle_ships_every_prompt_file_a_card_names() -> None:
    manifest = load_manifest(DEMO / "release.toml", check_files=False)
    shipped = shipped_prompts(manifest)
    assert set(shipped) == {"prompts/chat.jsonl", "prompts/longdoc.jsonl", "prompts/fidelity.jsonl"}
    assert all(path.is_file() for path, _ in shipped.values())
    assert {prompt_repo_path(w.prompts) for w in manifest.workload} <= set(shipped)
