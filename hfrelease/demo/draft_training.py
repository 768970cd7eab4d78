"""The demo draft's training provenance, written as speculators writes it: per-epoch validation and the command.

The demo draft is a small causal LM trained on the reference's corpus (not an EAGLE-3 head), but its
release carries the two files a speculators run leaves in its checkpoint directory, in their shapes
(vllm-project/speculators `speculators.train`; read back by `hfrelease.cards.training`):

- `<epoch>/val_metrics.json` (`Checkpointer.save_val_metrics`): `loss_epoch`, and per draft position i
  `full_acc_<i>_epoch` (draft tokens 0..i all equal the verifier's) and `cond_acc_<i>_epoch` (token i equal
  given 0..i-1 were), over held-out examples. The verifier is the reference and decoding is greedy, so
  `full_acc_<i>` is what vLLM's greedy verification accepts at position i: the figure a card sets beside
  the acceptance measured in serving.
- `train_command.txt` (`save_train_command`): `# Timestamp`, `# Git SHA`, `# World size` and package
  versions, then the command, `shlex.join(argv)`.

An epoch of the demo is `EPOCH_STEPS` optimizer steps (about ten passes over its ~700 examples): four
validation points over one short run.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.demo.training import IGNORE_INDEX, Example

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

EPOCH_STEPS = 250
VALIDATION_EVERY = 20  # every 20th example is held out of the draft's training for validation
POSITIONS_PER_EXAMPLE = 8
_PACKAGES = ("speculators", "vllm", "transformers", "torch", "compressed-tensors")  # speculators' header


def split_validation(examples: Sequence[Example]) -> tuple[list[Example], list[Example]]:
    """(training, validation): every VALIDATION_EVERY-th example held out, deterministically."""
    train = [e for i, e in enumerate(examples) if i % VALIDATION_EVERY]
    held = [e for i, e in enumerate(examples) if not i % VALIDATION_EVERY]
    return train, held


def positions(examples: Sequence[Example]) -> list[tuple[int, ...]]:
    """The prefixes validation drafts from: up to POSITIONS_PER_EXAMPLE evenly spaced points of each
    example's target (where a loss is taken), each the tokens before it."""
    found = []
    for e in examples:
        targets = [t for t, label in enumerate(e.labels) if label != IGNORE_INDEX and t > 0]
        step = max(1, len(targets) // POSITIONS_PER_EXAMPLE)
        found += [e.input_ids[:t] for t in targets[::step][:POSITIONS_PER_EXAMPLE]]
    return found


def greedy(model: LlamaForCausalLM, prefixes: Sequence[tuple[int, ...]], k: int, pad_id: int,
           batch: int = 64) -> list[list[int]]:
    """Each prefix continued by `k` greedy tokens of `model` (its own tokens fed back, as a drafter does)."""
    import torch

    out: list[list[int]] = []
    with torch.no_grad():
        for start in range(0, len(prefixes), batch):
            rows = [list(p) for p in prefixes[start:start + batch]]
            chosen: list[list[int]] = [[] for _ in rows]
            for _ in range(k):
                width = max(len(r) for r in rows)
                ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
                for i, r in enumerate(rows):
                    ids[i, :len(r)] = torch.tensor(r)
                # Right padding: causal attention never lets a real token see the padding after it.
                logits = model(input_ids=ids).logits
                last = torch.tensor([len(r) - 1 for r in rows])
                tokens = logits[torch.arange(len(rows)), last].argmax(dim=-1).tolist()
                for i, token in enumerate(tokens):
                    rows[i].append(int(token))
                    chosen[i].append(int(token))
            out += chosen
    return out


def val_metrics(draft: LlamaForCausalLM, held: Sequence[Example], prefixes: Sequence[tuple[int, ...]],
                verified: Sequence[Sequence[int]], *, pad_id: int) -> dict[str, float]:
    """One epoch's validation in speculators' names: the draft's loss on the held-out examples and, per draft
    position, its greedy chain against the verifier's greedy tokens `verified` at each prefix."""
    import torch

    from hfrelease.demo.training import _collate

    k = len(verified[0]) if verified else 0
    proposed = greedy(draft, prefixes, k, pad_id)
    full = [0] * k
    cond = [0] * k
    reached = [0] * k
    for mine, theirs in zip(proposed, verified, strict=True):
        for i in range(k):
            reached[i] += 1
            if mine[i] != theirs[i]:
                break
            cond[i] += 1
            full[i] += 1
    with torch.no_grad():
        losses = []
        for start in range(0, len(held), 32):
            input_ids, labels = _collate(held[start:start + 32], pad_id)
            losses.append(float(draft(input_ids=input_ids, labels=labels).loss))
    metrics = {"loss_epoch": sum(losses) / len(losses)}
    for i in range(k):
        metrics[f"full_acc_{i}_epoch"] = full[i] / len(proposed)
        metrics[f"cond_acc_{i}_epoch"] = cond[i] / reached[i] if reached[i] else 0.0
    return metrics


def write_val_metrics(checkpoint: Path, epoch: int, metrics: dict[str, float]) -> None:
    """`<checkpoint>/<epoch>/val_metrics.json`, as speculators' Checkpointer.save_val_metrics writes it."""
    path = checkpoint / str(epoch) / "val_metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: round(v, 6) for k, v in metrics.items()}), encoding="utf-8")


def git_sha() -> str:
    """The commit of the hfrelease checkout that trains (speculators records its own), or "unknown"."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              timeout=30, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_train_command(checkpoint: Path, argv: Sequence[str], *, sha: Callable[[], str] = git_sha) -> None:
    """`<checkpoint>/train_command.txt` with speculators' header (save_train_command), then the command."""
    versions = []
    for package in _PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        versions.append(f"# {package}: {version}")
    header = [f"# Timestamp: {datetime.datetime.now(datetime.UTC).isoformat()}", f"# Git SHA: {sha()}",
              "# World size: 1", *versions]
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / "train_command.txt").write_text("\n".join(header) + "\n" + shlex.join(argv) + "\n",
                                                  encoding="utf-8")


if TYPE_CHECKING:
    _ = torch
