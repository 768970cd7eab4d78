"""A draft's training provenance: `train_command.txt` and `val_metrics.json`, read as speculators writes them.

The shapes are speculators' own (vllm-project/speculators, `speculators.train`):

- `train_command.txt` (`utils.save_train_command`): header lines `# <Key>: <value>` (Timestamp, Git SHA,
  World size, then the version of speculators, vllm, transformers, torch, compressed-tensors), then the
  command, `shlex.join(argv)`, on one line.
- `val_metrics.json` (`Checkpointer.save_val_metrics`, written as `<checkpoint dir>/<epoch>/val_metrics.json`
  with 0-based epoch directories): one JSON object per epoch, metric name -> number, each name ending in
  `_epoch` (`Trainer.val_epoch` appends it): `loss_epoch`, `full_acc_<i>_epoch` (the share of positions
  whose draft tokens 0..i were all right: what a verifier accepts at draft position i) and
  `cond_acc_<i>_epoch` (position i right given 0..i-1 were), per draft position i.
  That is the EAGLE-3 trainer's shape. Speculators' block drafters (DFlash, DSpark: `models/<m>/metrics.py`)
  and P-EAGLE write `position_<i>_acc_epoch` instead -- the share of block position i's tokens that were
  right, each position scored on its own -- with an overall `full_acc_epoch` (no index); DFlash numbers a
  block's positions from its anchor (0) and scores from 1 unless it samples from the anchor, so the lowest
  position written is the first drafted. Its MTP trainer writes losses only (`loss_step_<i>_epoch`). Every
  accuracy is a `<name>_sum` / `<name>_total` pair reduced to `<name>` (`train.utils.normalize_counted_metrics`).

A release declares them in the draft's `files` (one `val_metrics.json` per epoch directory, or the one of
the released checkpoint). They are hostile input like any shipped file: the allowlist has already refused
a token-shaped string or a secret of the environment; this module refuses what would print wrong on a
card (not JSON, NaN or infinite values, a gap in the epochs, a credential passed as an option of the
training command, control characters) with the file named and what to do.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from hfrelease.cards.errors import CardError
from hfrelease.cards.text import Markdown, code_block, code_span, escape_markdown, hub_url, link
from hfrelease.manifest import Artifact, Manifest
from hfrelease.redact import SECRET_NAME

TRAIN_COMMAND = "train_command.txt"
VAL_METRICS = "val_metrics.json"
MAX_BYTES = 256 * 1024  # a command and a few dozen metrics; anything larger is not one of these files
# speculators' header keys: Timestamp, Git SHA, World size, then one line per package (lowercase names).
_HEADER = re.compile(r"^# (Timestamp|Git SHA|World size|[a-z][a-z0-9_.-]{0,63}): ?(.*)$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_POSITION = re.compile(r"^(full_acc|cond_acc)_(\d+)$")
_BLOCK_POSITION = re.compile(r"^position_(\d+)_acc$")  # DFlash, DSpark, P-EAGLE
_ACCURACY = re.compile(r"^(full_acc|cond_acc)(_\d+)?$|^position_\d+_acc$")  # each a share in [0, 1]
_SPECULATORS_HINT = ("speculators writes it with Checkpointer.save_val_metrics: one object per epoch, e.g. "
                     '{"loss_epoch": 1.9, "full_acc_0_epoch": 0.62, "cond_acc_0_epoch": 0.62}, in '
                     "<checkpoint dir>/<epoch>/val_metrics.json.")


@dataclass(frozen=True, kw_only=True)
class TrainCommand:
    """The training command and the header speculators writes above it (versions, git SHA, world size)."""

    header: tuple[tuple[str, str], ...]
    command: str


@dataclass(frozen=True, kw_only=True)
class ValEpoch:
    """One epoch's validation metrics, names without speculators' `_epoch` suffix."""

    epoch: int | None  # the epoch directory's number (0-based, as speculators numbers them); None: not in one
    path: str
    metrics: Mapping[str, float]

    def positions(self, kind: str = "full_acc") -> list[tuple[int, float]]:
        """Per draft position, `full_acc` (unconditional) or `cond_acc` (given the previous were right)."""
        found = [(int(m.group(2)), v) for k, v in self.metrics.items()
                 if (m := _POSITION.match(k)) and m.group(1) == kind]
        return sorted(found)

    def block_positions(self) -> list[tuple[int, float]]:
        """speculators' `position_<i>_acc` (DFlash, DSpark, P-EAGLE), renumbered as draft positions from 0."""
        found = sorted((int(m.group(1)), v) for k, v in self.metrics.items() if (m := _BLOCK_POSITION.match(k)))
        return [(index, value) for index, (_, value) in enumerate(found)]

    def acceptance(self) -> list[tuple[int, float]]:
        """Per draft position, the validation figure serving's acceptance is set beside (every draft up to that
        one accepted): `full_acc_<i>` as written; from `position_<i>_acc`, their running product (the estimate
        speculators' own expected accepted length, `eal`, is built on); empty when the file has neither."""
        if self.positions():
            return self.positions()
        product, running = 1.0, []
        for index, value in self.block_positions():
            product *= value
            running.append((index, product))
        return running


def _text(text: str, where: str, what: str) -> str:
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise CardError(f"{where}: {what} is larger than {MAX_BYTES // 1024} KiB", hint="Ship the file speculators "
                        "wrote, not a log.")
    bad = _CONTROL.search(text.replace("\r\n", "\n"))
    if bad:
        raise CardError(f"{where}: {what} holds the control character {bad.group(0)!r} (terminal escapes or "
                        "bidirectional overrides would print on the card)", hint="Remove it from the file.")
    return text


def parse_train_command(text: str, where: str) -> TrainCommand:
    """`train_command.txt` as speculators writes it; a command line passing a credential is refused."""
    lines = [line.rstrip() for line in _text(text, where, TRAIN_COMMAND).splitlines() if line.strip()]
    header = tuple((m.group(1).strip(), m.group(2).strip()) for line in lines if (m := _HEADER.match(line)))
    commands = [line for line in lines if not line.startswith("#")]
    if not commands:
        raise CardError(f"{where}: {TRAIN_COMMAND} holds no command (only comments or nothing)",
                        hint="speculators writes the header lines, then the command it ran (shlex.join(argv)).")
    command = "\n".join(commands)
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise CardError(f"{where}: the command of {TRAIN_COMMAND} is not a shell command line: {exc}",
                        hint="speculators writes shlex.join(argv): ship its file unchanged.") from exc
    secret = _secret_option(words)
    if secret is not None:
        raise CardError(f"{where}: the training command passes a credential ({secret}): it would be published",
                        hint="Remove it from the file (pass credentials through the environment when training); "
                             "the value is not repeated here.")
    return TrainCommand(header=header, command=command)


def _secret_option(words: Sequence[str]) -> str | None:
    """The first `--hf-token X`, `--api-key=X` or `WANDB_API_KEY=X` of a command, by its name only."""
    for index, word in enumerate(words):
        name, has_value, _ = word.partition("=")
        if word.startswith("-"):
            option = name.lstrip("-").replace("-", "_")
            follows = has_value or (index + 1 < len(words) and not words[index + 1].startswith("-"))
            if option and SECRET_NAME.search(option) and follows:
                return name
        elif has_value and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and SECRET_NAME.search(name):
            return f"{name}=..."
    return None


def parse_val_metrics(files: Sequence[tuple[str, str]], where: str) -> tuple[ValEpoch, ...]:
    """Every declared `val_metrics.json` (path, text), in epoch order; refused when they do not read as
    speculators' per-epoch objects or the epochs have a gap."""
    epochs = [_one_epoch(path, text, where) for path, text in files]
    numbered = sorted(e.epoch for e in epochs if e.epoch is not None)
    if len(epochs) > 1:
        if len(numbered) != len(epochs):
            unnumbered = next(e.path for e in epochs if e.epoch is None)
            raise CardError(f"{where}: {unnumbered} is not in an epoch directory, beside other epochs' files",
                            hint=f"Declare each epoch's file where speculators wrote it. {_SPECULATORS_HINT}")
        if len(set(numbered)) != len(numbered):
            raise CardError(f"{where}: two {VAL_METRICS} files of one epoch", hint="Declare each epoch once.")
    # A gap is not refused: speculators saves an epoch's metrics only when it checkpoints that epoch (every
    # `checkpoint_freq` epochs, or when the validation loss improved); the card shows it as a gap.
    return tuple(sorted(epochs, key=lambda e: (e.epoch is None, e.epoch or 0)))


def _one_epoch(path: str, text: str, where: str) -> ValEpoch:
    shown = f"{where}: {path}"

    def refuse(constant: str) -> float:
        raise CardError(f"{shown}: holds {constant}, not a number (a diverged or empty validation run)",
                        hint="Ship the metrics of a run whose validation finished; a card cannot print it.")

    try:
        data = json.loads(_text(text, where, path), parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise CardError(f"{shown}: not JSON ({exc})", hint=_SPECULATORS_HINT) from exc
    if not isinstance(data, dict) or not data:
        raise CardError(f"{shown}: not one epoch's metrics (a non-empty JSON object)", hint=_SPECULATORS_HINT)
    metrics: dict[str, float] = {}
    for key, value in data.items():
        if not key.endswith("_epoch") or not re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", key):
            raise CardError(f"{shown}: {key[:80]!r} is not a speculators validation metric (they end in _epoch)",
                            hint=_SPECULATORS_HINT)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CardError(f"{shown}: {key} is {json.dumps(value)[:40]}, not a finite number", hint=_SPECULATORS_HINT)
        metrics[key.removesuffix("_epoch")] = float(value)
    for key, value in metrics.items():
        if _ACCURACY.match(key) and not 0.0 <= value <= 1.0:
            raise CardError(f"{shown}: {key}_epoch is {value:g}, but an accuracy lies in [0, 1]",
                            hint=_SPECULATORS_HINT)
    parent = PurePosixPath(path).parent.name
    return ValEpoch(epoch=int(parent) if parent.isdigit() else None, path=path, metrics=metrics)


def training_files(files: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """An artifact's declared files (path -> text): its train_command.txt files and its val_metrics.json files."""
    commands = [(p, t) for p, t in files.items() if PurePosixPath(p).name == TRAIN_COMMAND]
    metrics = [(p, t) for p, t in files.items() if PurePosixPath(p).name == VAL_METRICS]
    return commands, metrics


def training_context(manifest: Manifest, artifact: Artifact, files: Mapping[str, str],
                     serving: Sequence[tuple[Markdown, Sequence[tuple[int, Markdown]]]]) -> dict[str, Any] | None:
    """The draft card's Training section: the method, the command as shipped, validation per epoch, and the
    last epoch's validation acceptance per draft position beside the acceptance measured in serving
    (`serving`: per workload, position -> registered figure; the seed's 0.622 in validation, 0.41 served)."""
    d = artifact.draft
    if d is None:
        return None
    where = f"artifact {artifact.id!r}"
    commands, metric_files = training_files(files)
    parsed = [(path, parse_train_command(text, f"{where}: {path}"), text) for path, text in commands]
    if len({c.command for _, c, _ in parsed}) > 1:
        raise CardError(f"{where}: its {TRAIN_COMMAND} files name different commands "
                        f"({', '.join(p for p, _, _ in parsed)})",
                        hint="speculators copies one command into every epoch directory: declare one run's files.")
    epochs = parse_val_metrics(metric_files, where) if metric_files else ()
    source = PurePosixPath(artifact.source.path) if artifact.source.path else None

    def shipped(declared: str) -> Markdown:
        # Where the bundle puts a declared file: relative to the checkpoint when inside it, else by name.
        path = PurePosixPath(declared)
        if source and path.is_relative_to(source):
            return code_span(path.relative_to(source).as_posix())
        epoch = path.parent.name  # speculators' <epoch>/val_metrics.json keeps its directory (bundle.gather)
        return code_span(f"{epoch}/{path.name}" if epoch.isdigit() else path.name)

    target = manifest.artifact_by_id(d.target)
    context: dict[str, Any] = {
        "method": code_span(d.method), "k": d.num_speculative_tokens,
        "target": link(target.title or target.repo, hub_url(target.repo)),
        "aux": code_span(json.dumps(d.aux_hidden_state_layer_ids)) if d.aux_hidden_state_layer_ids else None,
        "vocab": d.draft_vocab_size,
        "trained_with": escape_markdown(d.trained_with) if d.trained_with else None,
        "command": code_block(parsed[0][2].strip("\n"), language="bash") if parsed else None,
        "command_file": shipped(parsed[0][0]) if parsed else None,
        "epochs": _epochs_table(epochs) if epochs else None,
        "epoch_files": Markdown(", ".join(shipped(e.path) for e in epochs)) if epochs else None,
        "versus": None,
        "shape_note": _shape_note(epochs[-1]) if epochs else None,
    }
    last = epochs[-1] if epochs else None
    if last is not None and last.acceptance() and serving:
        rows = []
        for position, value in last.acceptance():
            cells = [dict(figures).get(position, Markdown("n/a")) for _, figures in serving]
            rows.append({"position": position, "validation": Markdown(f"{value:.3f}"), "serving": cells})
        context["versus"] = {"epoch": Markdown("the last" if last.epoch is None else str(last.epoch)),
                             "workloads": [label for label, _ in serving], "rows": rows,
                             "block": not last.positions()}
    return context


def _shape_note(last: ValEpoch) -> Markdown | None:
    """What the card says when the last epoch's metrics are not EAGLE-3's `full_acc_<i>`: how the figures were
    read (block drafters' `position_<i>_acc`), or that none of its metrics is an acceptance by position."""
    if last.positions():
        return None
    if last.block_positions():
        return Markdown("These metrics are speculators' block-drafter shape (DFlash, DSpark, P-EAGLE): "
                        "`position_<i>_acc`, the share of tokens right at each draft position scored on its own, "
                        "shown under acceptance by position; the validation acceptance set beside serving is their "
                        "running product up to each position (the estimate speculators' expected accepted length "
                        "is built on). They hold no conditional acceptance.")
    names = ", ".join(code_span(name) for name in sorted(last.metrics)[:12])
    more = f" and {len(last.metrics) - 12} more" if len(last.metrics) > 12 else ""
    return Markdown(f"{code_span(VAL_METRICS)} ({escape_markdown(last.path)}) holds no acceptance by draft position "
                    f"in a shape hfrelease reads (EAGLE-3's `full_acc_<i>`, or `position_<i>_acc`); its metrics: "
                    f"{names}{more}. Validation is not set beside serving acceptance.")


def _epochs_table(epochs: Sequence[ValEpoch]) -> dict[str, Any]:
    """Per epoch: loss, acceptance per draft position (full_acc) and conditional (cond_acc), one cell each,
    so the table stays as narrow as the card's column however many positions the draft has."""
    def joined(values: list[tuple[int, float]]) -> Markdown:
        return Markdown(" / ".join(f"{v:.3f}" for _, v in values)) if values else Markdown("n/a")

    rows = []
    for previous, e in zip((None, *epochs), epochs, strict=False):
        if previous is not None and previous.epoch is not None and e.epoch is not None and e.epoch > previous.epoch + 1:
            gap = (f"{previous.epoch + 1}" if e.epoch == previous.epoch + 2
                   else f"{previous.epoch + 1}{chr(0x2013)}{e.epoch - 1}")
            rows.append({"epoch": Markdown(gap), "loss": Markdown("no file"), "full": Markdown("not checkpointed"),
                         "cond": Markdown("")})
        loss = e.metrics.get("loss")
        rows.append({"epoch": Markdown("n/a" if e.epoch is None else str(e.epoch)),
                     "loss": Markdown(f"{loss:.3f}") if loss is not None else Markdown("n/a"),
                     "full": joined(e.positions("full_acc") or e.block_positions()),
                     "cond": joined(e.positions("cond_acc"))})
    return {"rows": rows}
