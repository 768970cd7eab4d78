"""Default locations of the demo family's build and of the quantization environment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hfrelease.errors import EnvironmentProblem
from hfrelease.resources import source_root


def default_build_dir() -> Path:
    """build/demo in the source checkout: model_cards/demo/release.toml points there."""
    root = source_root()
    if root is None:
        raise EnvironmentProblem(
            "the demo family is built inside a source checkout of hfrelease",
            hint="Pass --out DIR, or run from a clone of the repository.",
        )
    return root / "build" / "demo"


def default_quant_python(env: Mapping[str, str]) -> Path:
    """$HFRELEASE_QUANT_PYTHON, else .venv-quant/bin/python in the checkout (made by scripts/setup)."""
    if env.get("HFRELEASE_QUANT_PYTHON"):
        return Path(env["HFRELEASE_QUANT_PYTHON"])
    root = source_root()
    candidate = root / ".venv-quant" / "bin" / "python" if root else None
    if candidate is None or not candidate.exists():
        raise EnvironmentProblem(
            "no llm-compressor environment found to quantize the demo family",
            hint="Run scripts/setup (it creates .venv-quant), or set HFRELEASE_QUANT_PYTHON.",
        )
    return candidate
