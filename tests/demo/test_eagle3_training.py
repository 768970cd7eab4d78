"""The demo's EAGLE-3 heads: what the build asks speculators for, where each head lands, and the script's packing.

The training itself (speculators in `.venv-speculators`, minutes) runs in the demo build; its head is served and
gated in tests/demo/test_eagle3_head.py. Here the command runner is replaced by one that writes what the script
writes, so the build's side of it is checked in milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from hfrelease.demo.eagle3_training import EAGLE3, EAGLE3_PREVIOUS, EPOCHS, HEADS, VERIFIER, train_heads
from hfrelease.errors import EnvironmentProblem


def _arg(cmd: Sequence[str], flag: str) -> str:
    return cmd[list(cmd).index(flag) + 1]


def _writing_runner(calls: list[list[str]]) -> object:
    def run(cmd: Sequence[str], env: Mapping[str, str]) -> None:
        calls.append(list(cmd))
        assert env["HF_HUB_OFFLINE"] == "1" and env["HFRELEASE_TRAIN_THREADS"] == "1"
        prompts = Path(_arg(cmd, "--prompts"))
        assert len(prompts.read_text().splitlines()) == 324  # every chat prompt of the demo corpus
        out, training = Path(_arg(cmd, "--out")), Path(_arg(cmd, "--training"))
        out.mkdir(parents=True)
        (out / "config.json").write_text('{"speculators_model_type": "eagle3"}')
        (training / "0").mkdir(parents=True)
        (training / "0" / "val_metrics.json").write_text('{"loss_epoch": 1.0}')
        (training / "train_command.txt").write_text(" ".join(json.loads(_arg(cmd, "--command"))) + "\n")
    return run


def test_both_heads_are_trained_against_the_fp8_verifier_and_moved_into_place(tmp_path: Path) -> None:
    """v0.0's head learns the non-thinking answers only, v0.1's both modes; each lands with its provenance, no
    temporary file is left, and the recorded command is the build's own."""
    python = tmp_path / "python"
    python.touch()
    calls: list[list[str]] = []
    said: list[str] = []
    written = train_heads(tmp_path, speculators_python=python, seed=3, threads=1, say=said.append,
                          run=_writing_runner(calls))  # type: ignore[arg-type]
    assert written == ["eagle3-previous", "eagle3-previous-training", "eagle3", "eagle3-training"]
    modes = {Path(_arg(c, "--out")).name: c[c.index("--modes") + 1:c.index("--epochs")] for c in calls}
    assert modes == {f".{EAGLE3_PREVIOUS}.building": ["non-thinking"],
                     f".{EAGLE3}.building": ["non-thinking", "thinking"]}
    assert all(_arg(c, "--verifier") == str(tmp_path / VERIFIER) and _arg(c, "--epochs") == str(EPOCHS)
               and _arg(c, "--seed") == "3" for c in calls)
    for head, (training, _modes) in HEADS.items():
        assert (tmp_path / head / "config.json").is_file()
        assert (tmp_path / training / "train_command.txt").read_text() == "hfrelease demo build --seed 3\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*written, "python"])
    assert len(said) == 2 and "thinking" in said[1]


def test_a_failed_training_keeps_the_heads_already_there(tmp_path: Path) -> None:
    """The head is built beside its place: a training that fails leaves the previous build's head as it was."""
    python = tmp_path / "python"
    python.touch()
    (tmp_path / EAGLE3_PREVIOUS).mkdir()
    (tmp_path / EAGLE3_PREVIOUS / "config.json").write_text("old")

    def failing(cmd: Sequence[str], env: Mapping[str, str]) -> None:
        raise EnvironmentProblem("training the demo's EAGLE-3 head with speculators failed")

    with pytest.raises(EnvironmentProblem):
        train_heads(tmp_path, speculators_python=python, seed=0, threads=1, say=lambda _m: None, run=failing)
    assert (tmp_path / EAGLE3_PREVIOUS / "config.json").read_text() == "old"
    assert not list(tmp_path.glob(".*.prompts.jsonl"))


def test_a_missing_speculators_environment_is_named(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="speculators interpreter") as caught:
        train_heads(tmp_path, speculators_python=tmp_path / "nope", seed=0, threads=1, say=lambda _m: None)
    assert "scripts/setup" in (caught.value.hint or "")


def test_the_script_packs_conversations_as_speculators_collate_does() -> None:
    """Rows of at most the limit, conversations told apart by document ids, positions restarting in each."""
    import torch

    from hfrelease.demo.eagle3_training_script import pack

    def example(n: int) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.arange(n), "hidden_states": torch.zeros(n, 6), "verifier_last_hidden_states":
                torch.zeros(n, 2), "loss_mask": torch.ones(n, dtype=torch.bool), "position_ids": torch.arange(1, n + 1)}

    rows = pack([example(3), example(4), example(5)], 8)
    assert [r["input_ids"].shape for r in rows] == [torch.Size([1, 7]), torch.Size([1, 5])]
    assert rows[0]["document_ids"].tolist() == [[0, 0, 0, 1, 1, 1, 1]]
    assert rows[0]["position_ids"].tolist() == [[1, 2, 3, 1, 2, 3, 4]]
    assert rows[0]["hidden_states"].shape == (1, 7, 6) and rows[1]["document_ids"].tolist() == [[0] * 5]
