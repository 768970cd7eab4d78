"""A reader can re-run a card's figures (issue 25, part 6): prompts named by their path in the published repo,
each gate's `lm_eval` and each workload's `vllm bench serve` command, a supported-hardware line, and commands
folded one flag per line, none wider than the card column."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hfrelease.cards.reproduce import COLUMN_CHARS, MAX_LINE, fold, unfold
from hfrelease.files.rules import gate_command_files, prompt_repo_path, shipped_prompts
from hfrelease.manifest import Gate, Manifest, load_manifest
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
    assert "../../build" not in text  # the JSON gate's inputs too (they named the build's path)
    assert "`python gates/json_rate.py --prompts prompts/demo_json.jsonl`" in text
    assert "prompts `prompts/chat.jsonl` (in this repo)" in text
    assert "Supported hardware: " in text
    commands = text.split("<summary>Re-run these figures")[1].split("</details>")[0]
    # the four lm-eval gates, the sampled one once per seed (1, 2, 3)
    assert commands.count("lm_eval \\\n") == (6 if card != "draft" else 0)
    assert commands.count("python gates/json_rate.py \\\n  --prompts prompts/demo_json.jsonl") == (card != "draft")
    # chat, longdoc, load, context, verifier-chat, verifier-think
    assert commands.count("vllm bench serve \\\n") == 6
    assert "--dataset-path prompts/longdoc.jsonl" in commands
    code = re.findall(r"^```bash\n(.*?)^```$", text, flags=re.S | re.M)
    wide = [line for block in code for line in block.splitlines() if len(line) > COLUMN_CHARS]
    assert not wide, wide


def test_the_bundle_ships_every_prompt_file_a_card_names() -> None:
    manifest = load_manifest(DEMO / "release.toml", check_files=False)
    shipped = shipped_prompts(manifest)
    assert set(shipped) == {"prompts/chat.jsonl", "prompts/longdoc.jsonl", "prompts/fidelity.jsonl",
                            "gates/json_rate.py", "prompts/demo_json.jsonl"}
    assert all(path.is_file() for path, _ in shipped.values())
    assert {prompt_repo_path(w.prompts) for w in manifest.workload} <= set(shipped)


def _planted(tmp_path: Path, command: list[str], **update: object) -> tuple[Manifest, Gate]:
    """The demo manifest with one custom gate running `command`, rooted in tmp_path/family, whose gates/score.py
    is in the family's folder and ../build/items.jsonl outside it."""
    family = tmp_path / "family"
    (family / "gates").mkdir(parents=True)
    (family / "gates" / "score.py").write_text("print('planted')\n", encoding="utf-8")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "items.jsonl").write_text('{"prompt": "x"}\n', encoding="utf-8")
    demo = load_manifest(DEMO / "release.toml", check_files=False)
    gate = next(g for g in demo.gate if g.command).model_copy(update={"command": command, **update})
    manifest = demo.model_copy(update={"gate": [gate]})
    manifest._root = family
    return manifest, gate


def _blocks(markdown: str) -> list[str]:
    return [block.strip() for block in re.split(r"^# seed \d+$", markdown.split("```bash\n", 1)[1].rsplit("```", 1)[0],
                                                flags=re.M) if block.strip()]


def test_a_custom_gates_command_names_its_files_where_the_repo_ships_them(tmp_path: Path) -> None:
    """`python gates/score.py --items ../build/items.jsonl` (a build path: the demo's JSON gate printed
    `--prompts ../../build/demo/gates/demo_json.jsonl`) is shown as the reader runs it from a clone of the
    repo: the program at gates/score.py, the input at prompts/items.jsonl, both shipped there by the bundle,
    every other word what hfrelease ran (its own interpreter aside)."""
    from hfrelease.cards.reproduce import BASE_URL, gate_command
    from hfrelease.evaluation.custom_gate import custom_gate_argv

    manifest, gate = _planted(tmp_path, ["python", "gates/score.py", "--items", "../build/items.jsonl", "--n", "3"])
    assert gate_command_files(manifest, gate) == {1: "gates/score.py", 3: "prompts/items.jsonl"}
    shipped = shipped_prompts(manifest)
    assert shipped["gates/score.py"][0] == tmp_path / "family" / "gates" / "score.py"
    assert shipped["prompts/items.jsonl"][0] == tmp_path / "build" / "items.jsonl"
    artifact = manifest.artifact_by_id("fp8-dynamic")
    markdown = gate_command(manifest, gate, artifact)
    assert markdown is not None and "../" not in markdown
    [printed] = [unfold(block) for block in _blocks(markdown)]
    ran = custom_gate_argv(gate, base_url=BASE_URL, model=artifact.repo, out=Path("results/json.json"))
    assert printed[:5] == ["python", "gates/score.py", "--items", "prompts/items.jsonl", "--n"]
    assert printed[5:] == ran[5:]


def test_a_multi_seed_gate_shows_the_command_of_each_seed(tmp_path: Path) -> None:
    """A gate with `seeds = [...]` runs once per seed (hfrelease.verdicts.seeds.seed_runs); its card showed one
    `--seed 1234` command. Now one command per seed, each the argv that seed's run used: lm-eval's `--seed`
    and every request's seed, a custom gate's `--seed`."""
    from hfrelease.cards.reproduce import BASE_URL, gate_command
    from hfrelease.evaluation.custom_gate import custom_gate_argv
    from hfrelease.evaluation.lm_eval_command import lm_eval_call
    from hfrelease.verdicts.seeds import seed_runs

    demo = load_manifest(DEMO / "release.toml", check_files=False)
    sampled = next(g for g in demo.gate if g.seeds)
    artifact = demo.artifact_by_id("w8a8-int8")
    markdown = gate_command(demo, sampled, artifact)
    assert markdown is not None and [f"# seed {s}" in markdown for s in sampled.seeds or []] == [True, True, True]
    for block, run in zip(_blocks(markdown), seed_runs(sampled), strict=True):
        argv = unfold(block)
        expected = lm_eval_call(run, base_url=BASE_URL, model=artifact.repo, task_dir=Path("tasks"),
                                tokenizer=None).argv(output_path=f"results/{sampled.id}-seed{run.seed}")
        assert argv == expected and argv[argv.index("--seed") + 1] == str(run.seed)
        assert f'"seed":{run.seed},' in argv[argv.index("--model_args") + 1]
    manifest, gate = _planted(tmp_path, ["python", "gates/score.py"], seeds=[5, 6])
    custom = gate_command(manifest, gate, artifact)
    assert custom is not None
    for block, run in zip(_blocks(custom), seed_runs(gate), strict=True):
        ran = custom_gate_argv(run, base_url=BASE_URL, model=artifact.repo,
                               out=Path(f"results/{gate.id}-seed{run.seed}.json"))
        assert unfold(block)[1:] == ran[1:] and "--seed" in ran and ran[ran.index("--seed") + 1] == str(run.seed)
