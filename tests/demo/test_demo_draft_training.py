"""The demo draft's training provenance: validation against the verifier's greedy tokens, written in
speculators' shapes and read back by the card stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.cards.training import parse_train_command, parse_val_metrics
from hfrelease.demo.draft_training import (
    VALIDATION_EVERY,
    greedy,
    positions,
    split_validation,
    val_metrics,
    write_train_command,
    write_val_metrics,
)
from hfrelease.demo.training import IGNORE_INDEX, Example

pytestmark = pytest.mark.unit

VOCAB = 16


class _Counting:
    """A stand-in causal LM whose greedy next token is the last one + `step` (mod VOCAB), except after
    token `odd`, where it adds `odd_step`: a drafter that disagrees with its verifier in one known place."""

    def __init__(self, step: int = 1, odd: int = -1, odd_step: int = 1) -> None:
        self.step, self.odd, self.odd_step = step, odd, odd_step

    def __call__(self, *, input_ids: Any, labels: Any = None) -> Any:
        import torch

        nxt = torch.where(input_ids == self.odd, input_ids + self.odd_step, input_ids + self.step) % VOCAB
        logits = torch.nn.functional.one_hot(nxt, VOCAB).float()
        loss = torch.tensor(0.5)
        return type("Out", (), {"logits": logits, "loss": loss})()


def test_validation_split_and_positions() -> None:
    """Every VALIDATION_EVERY-th example is held out; positions are prefixes ending before a target token."""
    examples = [Example(input_ids=(1, 2, 3, 4), labels=(IGNORE_INDEX, IGNORE_INDEX, 3, 4)) for _ in range(45)]
    train, held = split_validation(examples)
    assert len(held) == 3 and len(train) == 42 and VALIDATION_EVERY == 20
    assert positions(held[:1]) == [(1, 2), (1, 2, 3)]


def test_acceptance_is_what_greedy_verification_accepts() -> None:
    """full_acc_i: the draft's own chain equals the verifier's greedy tokens up to position i; cond_acc_i:
    position i right given the earlier ones were. After token 5 the draft jumps by 2, the verifier by 1."""
    verifier, draft = _Counting(), _Counting(odd=5, odd_step=2)
    prefixes = [(1, 2), (3, 4), (1, 3)]  # drafts 3,4,5 | 5,6,7 vs 5,7 | 4,5,6 vs 4,5,7
    verified = greedy(verifier, prefixes, 3, pad_id=0)  # type: ignore[arg-type]
    assert verified == [[3, 4, 5], [5, 6, 7], [4, 5, 6]]
    held = [Example(input_ids=(1, 2, 3), labels=(1, 2, 3))]
    metrics = val_metrics(draft, held, prefixes, verified, pad_id=0)  # type: ignore[arg-type]
    assert metrics["full_acc_0_epoch"] == 1.0
    assert metrics["full_acc_1_epoch"] == pytest.approx(2 / 3) and metrics["cond_acc_1_epoch"] == pytest.approx(2 / 3)
    assert metrics["full_acc_2_epoch"] == pytest.approx(1 / 3) and metrics["cond_acc_2_epoch"] == pytest.approx(1 / 2)
    assert metrics["loss_epoch"] == 0.5


def test_files_read_back_as_speculators_files(tmp_path: Path) -> None:
    """What the demo writes parses as speculators' train_command.txt and per-epoch val_metrics.json."""
    write_train_command(tmp_path, ["hfrelease", "demo", "build", "--seed", "0"], sha=lambda: "3f2a9c1")
    for epoch in range(2):
        write_val_metrics(tmp_path, epoch, {"loss_epoch": 2.0 - epoch, "full_acc_0_epoch": 0.5 + epoch / 10})
    command = parse_train_command((tmp_path / "train_command.txt").read_text(), "draft")
    assert command.command == "hfrelease demo build --seed 0"
    assert {k for k, _ in command.header} >= {"Timestamp", "Git SHA", "World size", "speculators", "torch"}
    assert ("Git SHA", "3f2a9c1") in command.header
    epochs = parse_val_metrics([(f"{e}/val_metrics.json", (tmp_path / str(e) / "val_metrics.json").read_text())
                                for e in (1, 0)], "draft")
    assert [(e.epoch, e.positions()) for e in epochs] == [(0, [(0, 0.5)]), (1, [(0, 0.6)])]


def test_pin_copies_the_builds_training_files(tmp_path: Path) -> None:
    """`demo pin` copies the build's draft-training/ into the working copy (what its draft declares); a build
    without them is an environment problem naming `demo build`."""
    from hfrelease.demo.vendor import copy_training
    from hfrelease.errors import EnvironmentProblem

    build, family = tmp_path / "build", tmp_path / "family"
    write_train_command(build / "draft-training", ["hfrelease", "demo", "build"], sha=lambda: "abc")
    write_val_metrics(build / "draft-training", 0, {"loss_epoch": 1.0})
    (family / "draft-training" / "9").mkdir(parents=True)  # a stale epoch of an older build goes
    assert copy_training(build, family) == ["draft-training/0/val_metrics.json", "draft-training/train_command.txt"]
    assert not (family / "draft-training" / "9").exists()
    with pytest.raises(EnvironmentProblem, match="no draft training files") as raised:
        copy_training(tmp_path / "elsewhere", family)
    assert "hfrelease demo build" in (raised.value.hint or "")
