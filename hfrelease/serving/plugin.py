"""Install a family's out-of-tree vLLM plugin (`pip install --no-deps`) before any server starts.

vLLM loads plugins through the `vllm.general_plugins` entry-point group in every process it starts, so
the plugin must be installed into the environment that runs `vllm serve`. Installing is skipped when the
same plugin source (by content hash) is already installed there.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hfrelease import shell
from hfrelease.errors import EnvironmentProblem

_SKIP = {"__pycache__", ".git", "build", "dist"}


def source_hash(plugin_dir: Path) -> str:
    """sha256 over the plugin's files (path and content), ignoring build litter."""
    digest = hashlib.sha256()
    for path in sorted(plugin_dir.rglob("*")):
        relative = path.relative_to(plugin_dir)
        if path.is_file() and not (_SKIP & set(relative.parts)) and not relative.name.endswith(".egg-info"):
            if any(part.endswith(".egg-info") for part in relative.parts):
                continue
            digest.update(relative.as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _project_name(plugin_dir: Path) -> str | None:
    import tomllib

    try:
        data = tomllib.loads((plugin_dir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = data.get("project", {}).get("name")
    return name if isinstance(name, str) else None


def _installed(plugin_dir: Path, python: str) -> bool:
    """Whether the plugin's distribution is present in `python`'s environment (checked in-process when
    that is the running interpreter; otherwise the stamp is trusted)."""
    if Path(python).absolute() != Path(sys.executable).absolute():
        return True
    name = _project_name(plugin_dir)
    if name is None:
        return True
    import importlib.metadata

    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def ensure_plugin(
    plugin_dir: Path,
    *,
    python: str = sys.executable,
    echo: Callable[[str], None] | None = None,
    runner: shell.Runner | None = None,
) -> bool:
    """Install `plugin_dir` into `python`'s environment unless already there; True when it installed."""
    if not (plugin_dir / "pyproject.toml").is_file() and not (plugin_dir / "setup.py").is_file():
        raise EnvironmentProblem(
            f"{plugin_dir} is not an installable package (no pyproject.toml or setup.py)",
            hint="[serve].plugin must name the family's vllm_plugin/ package directory.",
        )
    # The environment is the venv the interpreter path names. Not resolved: a venv's bin/python is a
    # symlink to the base interpreter, and resolving it would share one stamp between every venv made
    # from that Python (a fresh clone's venv would then skip the install and serve without the plugin).
    environment = Path(python).parent.parent
    stamp = environment / ".hfrelease-plugins" / f"{source_hash(plugin_dir)}.stamp"
    if stamp.exists() and _installed(plugin_dir, python):
        return False
    # --no-build-isolation: the plugin builds with the setuptools already in the venv, so installing it
    # needs no package index (CI and air-gapped GPU runners alike).
    shell.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(plugin_dir)],
        echo=echo, error=EnvironmentProblem, what=f"installing the vLLM plugin {plugin_dir}",
        hint="The plugin must be a pip-installable package; run the pip command above by hand to see why.",
        runner=runner or subprocess.run,
    )
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(str(plugin_dir) + "\n")
    return True
