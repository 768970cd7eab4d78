"""What the demo build's steps share: the commands it runs in the other environments, and the family's architecture.

The build (`hfrelease.demo.build`), its NVFP4 quant (`hfrelease.demo.nvfp4`) and its EAGLE-3 heads
(`hfrelease.demo.eagle3_training`) run scripts in their own virtualenvs (llm-compressor's, speculators'), offline,
through the project's one subprocess wrapper.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hfrelease import shell
from hfrelease.errors import EnvironmentProblem

REFERENCE = "reference"
# The family's own architecture name, which vLLM knows only through the family's plugin
# (model_cards/demo/vllm_plugin): the demo exercises the out-of-tree plugin path the Nanbeige family
# depends on. transformers loads the checkpoints by model_type ("llama") and ignores the name.
ARCHITECTURE = "HfreleaseDemoForCausalLM"
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


def offline_env() -> dict[str, str]:
    """This process's environment with the Hub, datasets and transformers offline."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def stamp_architecture(artifact_dir: Path) -> None:
    """Name the family's architecture in a checkpoint's config.json."""
    config_path = artifact_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["architectures"] = [ARCHITECTURE]
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
