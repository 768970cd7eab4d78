"""A draft's training provenance read as speculators writes it: train_command.txt and per-epoch val_metrics.json,
hostile files refused with their name, validation acceptance shown beside serving acceptance."""

from __future__ import annotations

import json

import pytest

from hfrelease.cards import CardError, CardInputs, render_family
from hfrelease.cards.training import parse_train_command, parse_val_metrics

# The header speculators' save_train_command writes, then shlex.join(argv).
COMMAND = """# Timestamp: 2026-07-24T09:12:00+00:00
# Git SHA: 3f2a9c1
# World size: 1
# speculators: 0.6.0.dev
# vllm: 0.25.1
# transformers: 5.19.0
# torch: 2.13.0
# compressed-tensors: not installed
scripts/train.py --verifier-name-or-path NullSense/Nanbeige4.2-3B-FP8-Dynamic --epochs 4 --total-seq-len 4096
"""


def _epoch(loss: float, *accs: float) -> str:
    """One epoch's val_metrics.json as speculators' Trainer.val_epoch + save_val_metrics write it."""
    data = {"loss_epoch": loss} | {f"full_acc_{i}_epoch": a for i, a in enumerate(accs)}
    return json.dumps(data | {f"cond_acc_{i}_epoch": a for i, a in enumerate(accs)})


def test_train_command_header_and_command() -> None:
    """The header's keys (versions, git SHA) and the command line are read apart."""
    parsed = parse_train_command(COMMAND, "draft")
    assert ("speculators", "0.6.0.dev") in parsed.header and ("Git SHA", "3f2a9c1") in parsed.header
    assert parsed.command.startswith("scripts/train.py --verifier-name-or-path")


@pytest.mark.parametrize(("text", "needle"), [
    ("# Timestamp: x\n", "holds no command"),
    ("train.py --hf-token abcdef123456\n", "passes a credential (--hf-token)"),
    ("train.py --wandb_api_key=abcdef123456\n", "passes a credential (--wandb_api_key)"),
    ("WANDB_API_KEY=abcdef123456 python train.py\n", "passes a credential (WANDB_API_KEY=...)"),
    ("train.py --data 'unterminated\n", "not a shell command line"),
    ("train.py \x1b[31m--epochs 4\n", "control character"),
    ("train.py --epochs 4 \u202e\n", "control character"),
])
def test_hostile_train_command_is_refused(text: str, needle: str) -> None:
    """A command without a command, passing a credential as an option or assignment, unparsable, or carrying
    terminal escapes is refused, naming the file and never repeating the secret."""
    with pytest.raises(CardError) as raised:
        parse_train_command(text, "artifact 'draft': train_command.txt")
    assert needle in raised.value.message and "abcdef123456" not in raised.value.message


def test_settings_named_like_tokens_are_not_secrets() -> None:
    """--max-tokens 4096 or --draft-vocab-size are settings, not credentials."""
    assert parse_train_command("train.py --max-tokens 4096 --tokenizer x --draft-vocab-size 32000\n", "d").command


def test_val_metrics_epochs_in_order() -> None:
    """Epoch directories give the epoch numbers (0-based, as speculators numbers them); per-position
    acceptance read from full_acc_<i> and cond_acc_<i>."""
    epochs = parse_val_metrics([("ckpt/1/val_metrics.json", _epoch(1.7, 0.622, 0.4)),
                                ("ckpt/0/val_metrics.json", _epoch(2.1, 0.58, 0.33))], "draft")
    assert [e.epoch for e in epochs] == [0, 1]
    assert epochs[1].positions() == [(0, 0.622), (1, 0.4)] and epochs[1].metrics["loss"] == 1.7


@pytest.mark.parametrize(("files", "needle"), [
    ([("0/val_metrics.json", "{not json")], "not JSON"),
    ([("0/val_metrics.json", "[1, 2]")], "a non-empty JSON object"),
    ([("0/val_metrics.json", "{}")], "a non-empty JSON object"),
    ([("0/val_metrics.json", '{"loss_epoch": NaN}')], "holds NaN"),
    ([("0/val_metrics.json", '{"loss_epoch": Infinity}')], "holds Infinity"),
    ([("0/val_metrics.json", '{"loss_epoch": "low"}')], "not a finite number"),
    ([("0/val_metrics.json", '{"loss_epoch": true}')], "not a finite number"),
    ([("0/val_metrics.json", '{"val_acceptance": 0.5}')], "not a speculators validation metric"),
    ([("0/val_metrics.json", '{"full_acc_0_epoch": 1.5}')], "an accuracy lies in [0, 1]"),
    ([("0/val_metrics.json", _epoch(2.0, 0.5)), ("val_metrics.json", _epoch(1.0, 0.6))], "not in an epoch directory"),
    ([("a/0/val_metrics.json", _epoch(2.0, 0.5)), ("b/0/val_metrics.json", _epoch(1.0, 0.6))], "of one epoch"),
])
def test_hostile_val_metrics_are_refused(files: list[tuple[str, str]], needle: str) -> None:
    """Malformed JSON, NaN or infinite values, non-numbers, keys speculators never writes, accuracies outside
    [0, 1], an unnumbered file beside epoch directories or one epoch twice: refused with the file named."""
    with pytest.raises(CardError) as raised:
        parse_val_metrics(files, "artifact 'draft'")
    assert needle in raised.value.message and "artifact 'draft'" in raised.value.message


def test_draft_card_shows_validation_beside_serving(nanbeige: CardInputs) -> None:
    """The draft card shows the command file with its header's versions, each epoch, and the last epoch's
    validation acceptance per position beside the acceptance measured serving the draft (registered under the
    acceptance table's ids)."""
    files = {"eagle3": {"eagle3/train_command.txt": COMMAND,
                        "eagle3/0/val_metrics.json": _epoch(2.1, 0.58, 0.33, 0.2),
                        "eagle3/1/val_metrics.json": _epoch(1.7, 0.622, 0.4, 0.25)}}
    inputs = CardInputs(manifest=nanbeige.manifest, records=nanbeige.records, sections=nanbeige.sections, files=files)
    card = render_family(inputs, plots=False, artifacts=["eagle3"]).cards[0]
    readme = card.readme
    assert "# speculators: 0.6.0.dev" in readme and "Training command (`train_command.txt`" in readme
    assert "| 1 | 1.700 | 0.622 / 0.400 / 0.250 | 0.622 / 0.400 / 0.250 |" in readme
    versus = readme.split("Validation against serving")[1].split("\n\n")[1].splitlines()
    assert versus[0].startswith("| Draft position | Validation | ") and "`eagle3`" in versus[0]
    served = {row.id: row.text for row in card.numbers}
    first = versus[2].split(" | ")
    assert first[:2] == ["| 0", "0.622"] and first[2] in set(served.values())
    assert any(k.endswith(".pos0") for k in served)


def test_bad_file_stops_the_render(nanbeige: CardInputs) -> None:
    """A declared val_metrics.json with NaN stops `render` (exit 3) naming the artifact and the file."""
    files = {"eagle3": {"eagle3/0/val_metrics.json": '{"loss_epoch": NaN}'}}
    inputs = CardInputs(manifest=nanbeige.manifest, records=nanbeige.records, sections=nanbeige.sections, files=files)
    with pytest.raises(CardError, match=r"artifact 'eagle3': eagle3/0/val_metrics.json: holds NaN") as raised:
        render_family(inputs, plots=False, artifacts=["eagle3"])
    assert raised.value.exit_code == 3


def test_epochs_speculators_did_not_checkpoint_show_as_a_gap(nanbeige: CardInputs) -> None:
    """speculators writes val_metrics.json only for the epochs it checkpoints: a gap is shown, not hidden."""
    files = {"eagle3": {"eagle3/0/val_metrics.json": _epoch(2.1, 0.58), "eagle3/3/val_metrics.json": _epoch(1.6, 0.63)}}
    inputs = CardInputs(manifest=nanbeige.manifest, records=nanbeige.records, sections=nanbeige.sections, files=files)
    readme = render_family(inputs, plots=False, artifacts=["eagle3"]).cards[0].readme
    assert "| 1\u20132 | no file | not checkpointed |  |" in readme and "| 3 | 1.600 | 0.630 |" in readme


def _block_epoch(loss: float, *accs: float, first: int = 1) -> str:
    """One epoch as speculators' DFlash / DSpark / P-EAGLE metrics reduce to (normalize_counted_metrics): an
    overall full_acc, position_<i>_acc from the block's first scored position (1: DFlash skips its anchor)."""
    data = {"loss_epoch": loss, "full_acc_epoch": sum(accs) / len(accs), "eal_epoch": 1.2}
    return json.dumps(data | {f"position_{first + i}_acc_epoch": a for i, a in enumerate(accs)})


@pytest.mark.parametrize("first", [0, 1])
def test_block_drafters_position_acc_is_read(first: int) -> None:
    """speculators' position_<i>_acc (block drafters, P-EAGLE) reads as draft positions from 0 wherever the
    block's scoring starts; acceptance as serving counts it is their running product."""
    (epoch,) = parse_val_metrics([("d/0/val_metrics.json", _block_epoch(1.1, 0.8, 0.5, first=first))], "draft")
    assert epoch.positions() == [] and epoch.block_positions() == [(0, 0.8), (1, 0.5)]
    assert epoch.acceptance() == [(0, 0.8), (1, pytest.approx(0.4))]


def test_eagle3_shape_is_read_as_written() -> None:
    """EAGLE-3's full_acc_<i> is already acceptance up to position i: taken as written."""
    (epoch,) = parse_val_metrics([("d/0/val_metrics.json", _epoch(1.7, 0.622, 0.4))], "draft")
    assert epoch.acceptance() == [(0, 0.622), (1, 0.4)]


@pytest.mark.parametrize("key", ["position_2_acc_epoch", "full_acc_epoch"])
def test_block_accuracies_outside_0_1_are_refused(key: str) -> None:
    """The block drafters' accuracies are shares too: 1.5 is refused with the file named."""
    with pytest.raises(CardError, match=r"an accuracy lies in \[0, 1\]"):
        parse_val_metrics([("d/0/val_metrics.json", json.dumps({key: 1.5}))], "artifact 'draft'")


def test_block_drafter_card_shows_validation_beside_serving(nanbeige: CardInputs) -> None:
    """A draft whose val_metrics.json has speculators' position_<i>_acc shape (not EAGLE-3's) still gets its
    validation-vs-serving table, the running product in the validation column, and a note saying how the
    figures were read."""
    files = {"eagle3": {"eagle3/0/val_metrics.json": _block_epoch(1.1, 0.8, 0.5, 0.5)}}
    inputs = CardInputs(manifest=nanbeige.manifest, records=nanbeige.records, sections=nanbeige.sections, files=files)
    readme = render_family(inputs, plots=False, artifacts=["eagle3"]).cards[0].readme
    assert "| 0 | 1.100 | 0.800 / 0.500 / 0.500 | n/a |" in readme
    assert "block-drafter shape" in readme and "(the running product of `position_<i>_acc`)" in readme
    versus = readme.split("Validation against serving")[1].split("\n\n")[1].splitlines()
    assert [row.split(" | ")[:2] for row in versus[2:5]] == [["| 0", "0.800"], ["| 1", "0.400"], ["| 2", "0.200"]]


def test_a_shape_without_positions_is_a_card_note(nanbeige: CardInputs) -> None:
    """speculators' MTP trainer writes losses only (loss_step_<i>): the card says its val_metrics.json holds no
    acceptance by position, naming the metrics it does hold, instead of dropping the comparison silently."""
    files = {"eagle3": {"eagle3/0/val_metrics.json": json.dumps(
        {"loss_epoch": 2.0, "loss_step_0_epoch": 1.2, "loss_step_1_epoch": 0.8})}}
    inputs = CardInputs(manifest=nanbeige.manifest, records=nanbeige.records, sections=nanbeige.sections, files=files)
    readme = render_family(inputs, plots=False, artifacts=["eagle3"]).cards[0].readme
    assert "holds no acceptance by draft position" in readme and "`loss_step_1`" in readme
    assert "Validation against serving" not in readme
