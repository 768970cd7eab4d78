"""The demo family builder really trains, quantizes (in the llm-compressor venv) and saves loadable artifacts."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from hfrelease.demo import data
from hfrelease.demo.build import (
    ARTIFACT_IDS,
    DRAFT,
    EAGLE3_STAMP_KEY,
    FP8_DYNAMIC,
    NVFP4_STAMP_KEY,
    STAMP_FILE,
    UNDERTRAINED,
    W8A8_INT8,
    build_demo_family,
    read_stamp,
    tasks_dir,
)
from hfrelease.demo.commands import REFERENCE
from hfrelease.demo.eagle3_training import EAGLE3, EAGLE3_TRAINING, HEADS
from hfrelease.demo.nvfp4 import NVFP4
from hfrelease.errors import ExitCode
from tests.conftest import CliRun

ROOT = Path(__file__).resolve().parents[2]
QUANT_PYTHON = Path(os.environ.get("HFRELEASE_QUANT_PYTHON", ROOT / ".venv-quant" / "bin" / "python"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("vllm_environment"),
    pytest.mark.skipif(not QUANT_PYTHON.exists(), reason=f"no llm-compressor environment at {QUANT_PYTHON}"),
]


@pytest.fixture(scope="module")
def family(demo_build: dict[str, Path]) -> tuple[Path, dict[str, Path], list[str]]:
    """The session's one real build (tests/demo_session.py): a few minutes, so made once and shared."""
    return ROOT / "build" / "demo", demo_build, []


def _greedy(model_dir: Path, prompt: str, *, thinking: bool) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model: Any = AutoModelForCausalLM.from_pretrained(str(model_dir))
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False, enable_thinking=thinking
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=48, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return str(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))


def test_every_artifact_has_a_servable_layout(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """Each artifact directory holds config, safetensors weights, tokenizer with chat template, generation config."""
    _, artifacts, _ = family
    assert set(artifacts) == {*ARTIFACT_IDS, EAGLE3, NVFP4}  # the last two are add-ons with stamps of their own
    for path in artifacts.values():
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                     "generation_config.json"):  # fmt: skip
            assert (path / name).is_file(), f"{path / name} missing"
        assert (path / "chat_template.jinja").is_file() or "chat_template" in json.loads(
            (path / "tokenizer_config.json").read_text()
        )


def test_unquantized_artifacts_load_and_answer(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """The reference answers arithmetic in both thinking modes; the draft is smaller and shares the tokenizer."""
    from transformers import AutoConfig, AutoTokenizer

    _, artifacts, _ = family
    a, op, b = data.arithmetic_questions()[0]
    answer = str(a + b if op == "+" else a - b)
    thought = _greedy(artifacts[REFERENCE], data.arith_prompt(a, op, b), thinking=True)
    assert thought.startswith("<think>") and thought.split("</think>")[-1].strip() == answer
    assert _greedy(artifacts[REFERENCE], data.arith_prompt(a, op, b), thinking=False).strip() == answer

    ref_cfg = AutoConfig.from_pretrained(str(artifacts[REFERENCE]))
    draft_cfg = AutoConfig.from_pretrained(str(artifacts[DRAFT]))
    assert draft_cfg.num_hidden_layers < ref_cfg.num_hidden_layers
    assert draft_cfg.vocab_size == ref_cfg.vocab_size
    # Same architecture: the under-trained artifact differs from the reference only in its weights.
    assert json.loads((artifacts[UNDERTRAINED] / "config.json").read_text()) == json.loads(
        (artifacts[REFERENCE] / "config.json").read_text()
    )
    vocab = AutoTokenizer.from_pretrained(str(artifacts[REFERENCE])).get_vocab()
    assert AutoTokenizer.from_pretrained(str(artifacts[DRAFT])).get_vocab() == vocab
    assert {"<think>", "</think>", "<|im_start|>", "<|im_end|>"} <= set(vocab)


def test_undertrained_is_worse_than_reference(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """On the first 20 arithmetic questions the under-trained checkpoint answers fewer correctly."""
    _, artifacts, _ = family

    def correct(model_dir: Path) -> int:
        hits = 0
        for row in data.arith_rows()[:20]:
            hits += _greedy(model_dir, str(row["question"]), thinking=False).strip() == row["answer"]
        return hits

    reference, undertrained = correct(artifacts[REFERENCE]), correct(artifacts[UNDERTRAINED])
    assert reference >= 16
    assert undertrained <= reference - 4


@pytest.mark.parametrize(
    ("artifact", "weights", "activations"),
    [
        (FP8_DYNAMIC, ("float", 8, "channel"), ("float", 8, "token")),
        (W8A8_INT8, ("int", 8, "channel"), ("int", 8, "token")),
    ],
)
def test_quant_config_names_the_scheme(
    family: tuple[Path, dict[str, Path], list[str]],
    artifact: str,
    weights: tuple[str, int, str],
    activations: tuple[str, int, str],
) -> None:
    """The quantized artifacts are compressed-tensors checkpoints with dynamic per-token activations, lm_head kept."""
    _, artifacts, _ = family
    qcfg = json.loads((artifacts[artifact] / "config.json").read_text())["quantization_config"]
    assert qcfg["quant_method"] == "compressed-tensors"
    assert "lm_head" in qcfg["ignore"]
    (group,) = qcfg["config_groups"].values()
    assert group["targets"] == ["Linear"]
    w, a = group["weights"], group["input_activations"]
    assert (w["type"], w["num_bits"], w["strategy"]) == weights
    assert (a["type"], a["num_bits"], a["strategy"], a["dynamic"]) == (*activations, True)


def test_fp8_artifact_loads_with_transformers(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """The FP8-dynamic checkpoint loads with transformers and holds float8 weights for the Linear layers."""
    import torch
    from safetensors import safe_open

    _, artifacts, _ = family
    with safe_open(str(artifacts[FP8_DYNAMIC] / "model.safetensors"), framework="pt") as fh:
        dtypes = {name: fh.get_slice(name).get_dtype() for name in fh.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    assert dtypes["model.layers.0.mlp.down_proj.weight"] == "F8_E4M3"
    assert dtypes["lm_head.weight"] == "BF16"

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(artifacts[FP8_DYNAMIC]))
    logits = model(torch.tensor([[1, 2, 3]])).logits
    assert torch.isfinite(logits).all()


def test_stamp_makes_rebuild_a_no_op(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """build.json records version, seed and hashes; a second call returns at once without rebuilding."""
    out, artifacts, _ = family
    stamp = read_stamp(out)
    assert stamp is not None and stamp["seed"] == 0
    files = stamp["files"]
    assert isinstance(files, dict) and f"{REFERENCE}/model.safetensors" in files
    before = (out / STAMP_FILE).stat().st_mtime_ns
    messages: list[str] = []
    again = build_demo_family(out, quant_python=QUANT_PYTHON, seed=0, progress=messages.append)
    assert again == artifacts
    assert (out / STAMP_FILE).stat().st_mtime_ns == before
    assert messages and "already built" in messages[0]


def test_tasks_dir_has_absolute_data_paths(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """The build's task YAMLs point lm-eval at JSONL files that exist, from any working directory."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    out, _, _ = family
    for name in ("demo_arith", "demo_arith_nothink", "demo_mc"):
        cfg = yaml.safe_load((tasks_dir(out) / f"{name}.yaml").read_text())
        path = Path(cfg["dataset_kwargs"]["data_files"]["test"])
        assert path.is_absolute() and path.is_file()


def test_check_accepts_the_demo_manifest_once_pinned(
    family: tuple[Path, dict[str, Path], list[str]], vendor_hub: str, tmp_path: Path, cli: CliRun
) -> None:
    """The demo manifest passes `hfrelease check` once `hfrelease demo pin` has pinned this build's vendor
    revision (the maintainer's "upload, then pin" step); pinned to a commit the Hub lacks, check names it."""
    import shutil

    from hfrelease.demo.vendor import REFERENCE_REPO, read_pins

    copy = tmp_path / "model_cards" / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", copy, ignore=shutil.ignore_patterns("results", "build"))
    (tmp_path / "build").symlink_to(ROOT / "build")
    text = (copy / "release.toml").read_text()
    pins = read_pins(family[0])
    stale = "0" * 40
    # The reference's pin made stale: `check` names its place and the commit.
    pattern = r'(hub\s*=\s*"' + re.escape(REFERENCE_REPO) + r'"\s*,\s*revision\s*=\s*")[0-9a-f]{40}'
    (copy / "release.toml").write_text(re.sub(pattern, rf"\g<1>{stale}", text))

    code, _, err = cli(["check", str(copy)])
    assert code == ExitCode.CONFIG and "artifact[0].source.revision" in err and stale in err, err

    code, _, err = cli(["demo", "pin", str(copy)])
    pinned = (copy / "release.toml").read_text()
    assert code == 0 and all(revision in pinned for revision in pins.values()), err
    code, _, err = cli(["check", str(copy)])
    assert code == 0, err


def test_draft_training_provenance_reads_as_speculators_files(family: tuple[Path, dict[str, Path], list[str]]) -> None:
    """The build writes the draft's train_command.txt and one val_metrics.json per epoch (speculators' shapes)
    beside it, which the card stage reads: acceptance per position rises from the first epoch to the last."""
    from hfrelease.cards.training import parse_train_command, parse_val_metrics
    from hfrelease.demo.build import TRAINING_DIR

    out, _, _ = family
    training = out / TRAINING_DIR
    command = parse_train_command((training / "train_command.txt").read_text(), "draft")
    assert command.command.startswith("hfrelease demo build --seed")
    epochs = parse_val_metrics([(p.relative_to(training).as_posix(), p.read_text())
                                for p in training.glob("*/val_metrics.json")], "draft")
    assert [e.epoch for e in epochs] == [0, 1, 2, 3]
    assert len(epochs[-1].positions()) == 3 and epochs[-1].positions()[0][1] >= epochs[0].positions()[0][1]


def test_eagle3_heads_are_speculators_checkpoints_with_their_provenance(
    family: tuple[Path, dict[str, Path], list[str]],
) -> None:
    """Both EAGLE-3 heads are speculators-format checkpoints for the FP8 verifier (no remote code shipped), each with
    speculators' train_command.txt and ten val_metrics.json; the stamp records their files and the NVFP4 quant's."""
    from hfrelease.cards.training import parse_train_command, parse_val_metrics

    out, _, _ = family
    stamp = read_stamp(out)
    assert stamp is not None
    for head, (training_dir, _modes) in HEADS.items():
        config = json.loads((out / head / "config.json").read_text())
        assert config["speculators_model_type"] == "eagle3" and "auto_map" not in config
        assert config["speculators_config"]["verifier"]["name_or_path"] == "hfrelease-demo/tiny-FP8-Dynamic"
        assert config["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
        assert not (out / head / "config.py").exists()
        training = out / training_dir
        command = parse_train_command((training / "train_command.txt").read_text(), head)
        assert command.command == "hfrelease demo build --seed 0"
        epochs = parse_val_metrics([(p.relative_to(training).as_posix(), p.read_text())
                                    for p in training.glob("*/val_metrics.json")], head)
        assert [e.epoch for e in epochs] == list(range(10))
        assert f"{head}/model.safetensors" in stamp[EAGLE3_STAMP_KEY]  # type: ignore[operator]
    assert (out / EAGLE3_TRAINING / "9" / "val_metrics.json").is_file()
    assert f"{NVFP4}/model.safetensors" in stamp[NVFP4_STAMP_KEY]  # type: ignore[operator]
