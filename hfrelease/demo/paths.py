"""Default locations of the demo family's build and of the quantization environment."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from hfrelease.errors import ConfigProblem, EnvironmentProblem
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


def default_speculators_python(env: Mapping[str, str]) -> Path:
    """$HFRELEASE_SPECULATORS_PYTHON, else .venv-speculators/bin/python in the checkout (made by scripts/setup)."""
    if env.get("HFRELEASE_SPECULATORS_PYTHON"):
        return Path(env["HFRELEASE_SPECULATORS_PYTHON"])
    root = source_root()
    candidate = root / ".venv-speculators" / "bin" / "python" if root else None
    if candidate is None or not candidate.exists():
        raise EnvironmentProblem(
            "no speculators environment found to train the demo's EAGLE-3 head",
            hint="Run scripts/setup (it creates .venv-speculators), or set HFRELEASE_SPECULATORS_PYTHON.",
        )
    return candidate


_MISSING = re.compile(r"^(?:directory|file) '(?P<path>[^']+)' does not exist")


def unbuilt_demo_note(manifest: Path, problems: Sequence[ConfigProblem]) -> str | None:
    """What to say instead of `problems` when `manifest` is this checkout's demo family and nothing of its
    build is here (a fresh clone: no build/demo at all) and every problem is a path under it that does not
    exist; None otherwise (a partial build, any other problem or manifest: the problems stand)."""
    root = source_root()
    if root is None or manifest.resolve() not in {root / "model_cards" / "demo", root / "model_cards" / "demo" /
                                                  "release.toml"}:
        return None
    build = root / "build" / "demo"
    if build.exists() or not problems:
        return None
    family = root / "model_cards" / "demo"
    for problem in problems:
        missing = _MISSING.match(problem.message)
        if missing is None or not (family / missing.group("path")).resolve().is_relative_to(build):
            return None
    return (f"{manifest}: the demo family is not built here ({build} does not exist): its {len(problems)} "
            "local sources and task directories, its serve args and its preflight are checked once "
            "`hfrelease demo build` has made them")
