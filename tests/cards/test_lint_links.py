"""The commands a card prints name files a reader has (issue 25): a path that leaves the published repo (`../`,
an absolute or home path) in a shell block or a code span is a `check --cards` problem; URLs and the HTTP
endpoint `vllm bench serve` names are not paths."""

from __future__ import annotations

import pytest

from hfrelease.cards.lint.links import command_paths
from tests.conftest import ROOT

DEMO = ROOT / "model_cards" / "demo"


def test_a_command_naming_a_build_path_is_a_problem() -> None:
    body = ("custom harness, `python gates/json_rate.py --prompts ../../build/demo/gates/demo_json.jsonl`\n\n"
            "```bash\npython gates/score.py \\\n  --items /home/me/items.jsonl \\\n  --out=~/report.json\n```\n")
    problems = command_paths("card.md", body)
    assert [p.split(" names ")[1].split(",")[0] for p in problems] == [
        "/home/me/items.jsonl", "~/report.json", "../../build/demo/gates/demo_json.jsonl"]
    assert all(p.startswith("card.md: a command names ") for p in problems)


def test_repo_paths_urls_and_endpoints_are_not_problems() -> None:
    body = ("```bash\nvllm bench serve \\\n  --base-url http://localhost:8000 \\\n"
            "  --endpoint /v1/chat/completions \\\n  --dataset-path prompts/chat.jsonl\n```\n\n"
            "`python gates/json_rate.py --prompts prompts/demo_json.jsonl`\n\n"
            "```bibtex\n@misc{x, url = {../not/a/command}}\n```\n")
    assert command_paths("card.md", body) == []


@pytest.mark.parametrize("card", sorted(p.parent.name for p in DEMO.glob("*/README.md")))
def test_the_committed_demo_cards_name_no_path_outside_their_repo(card: str) -> None:
    path = DEMO / card / "README.md"
    assert command_paths(str(path), path.read_text(encoding="utf-8")) == []
