"""An NVFP4 quant of a demo build's reference, made with llm-compressor like the build's FP8 and W8A8 quants.

An artifact of the demo family, built by `hfrelease demo build` as an add-on of the build (`hfrelease.demo.build`)
and served on a CPU build of vLLM through the emulation route (`hfrelease.serving.emulation`). NVFP4 calibrates
one global activation scale per layer, on the demo's speed workload prompts (`prompts/chat.jsonl`,
`prompts/longdoc.jsonl` of the build): never on a gate's prompts, so no quality or fidelity gate is measured on
the data that calibrated it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hfrelease.demo.commands import (
    QUANTIZE_SCRIPT,
    REFERENCE,
    CommandRunner,
    offline_env,
    run_quantization,
    stamp_architecture,
)

NVFP4 = "nvfp4"
NVFP4_SCHEME = "NVFP4"
CALIBRATION_FILES = ("prompts/chat.jsonl", "prompts/longdoc.jsonl")


def build_nvfp4(
    build_dir: Path, dst: Path, *, quant_python: Path, run: CommandRunner = run_quantization
) -> Path:
    """Quantize the reference of the demo build in `build_dir` to NVFP4 into `dst` (replaced when there).

    `quant_python` is the llm-compressor environment's interpreter (about a minute on 2 cores). The build
    is only read: the quant is written beside `dst` and moved into place when complete.
    """
    work = dst.with_name(f".{dst.name}.building")
    shutil.rmtree(work, ignore_errors=True)
    calibration = [str(build_dir / name) for name in CALIBRATION_FILES]
    run(
        [
            str(quant_python), str(QUANTIZE_SCRIPT), "--src", str(build_dir / REFERENCE), "--dst", str(work),
            "--scheme", NVFP4_SCHEME, "--calibration", *calibration,
        ],
        offline_env(),
    )  # fmt: skip
    stamp_architecture(work)  # the family's architecture name, as the build's own quants carry
    shutil.rmtree(dst, ignore_errors=True)
    work.replace(dst)
    return dst
