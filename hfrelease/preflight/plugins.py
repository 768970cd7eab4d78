"""Every plugin directory the manifest names is an installable package, read without installing it.

The serving stage installs `[serve].plugin` with `pip install --no-deps --no-build-isolation` before vLLM
starts (`hfrelease.serving.plugin`), and `bundle` installs it to read its `vllm.general_plugins` entry
point (`hfrelease.bundle.plugin_check`). Both fail on a directory that is not a package; this finds that
from the files alone, in milliseconds, before any runner is allocated: a `pyproject.toml` naming a build
backend (or a `setup.py`), and at least one Python package or module to install.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from hfrelease.bundle.plugin_check import PLUGIN_GROUP
from hfrelease.errors import ConfigProblem
from hfrelease.manifest import Manifest
from hfrelease.manifest.input_files import read_input_text

_NOT_CODE = {"setup.py", "conftest.py", "noxfile.py"}


def plugin_dirs(manifest: Manifest) -> dict[str, str]:
    """Each plugin directory the manifest names, by its path in release.toml -> the first location naming it."""
    found: dict[str, str] = {}
    if manifest.serve.plugin:
        found[manifest.serve.plugin] = "serve.plugin"
    for index, artifact in enumerate(manifest.artifact):
        if artifact.serve is not None and artifact.serve.plugin:
            found.setdefault(artifact.serve.plugin, f"artifact[{index}].serve.plugin")
    return found


def _has_code(directory: Path) -> bool:
    for base in (directory, directory / "src"):
        if not base.is_dir():
            continue
        for child in base.iterdir():
            if child.is_dir() and (child / "__init__.py").is_file():
                return True
            if child.suffix == ".py" and child.name not in _NOT_CODE:
                return True
    return False


def plugin_problem(directory: Path) -> str | None:
    """Why `directory` cannot be pip-installed as a vLLM plugin, or None when it can (as far as files tell)."""
    pyproject, setup = directory / "pyproject.toml", directory / "setup.py"
    if not pyproject.is_file() and not setup.is_file():
        held = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
        what = f"it holds only {', '.join(held)}" if held else "it is empty"
        return (f"not an installable package: {what} (no pyproject.toml or setup.py). A placeholder? Put the "
                f"plugin's package here: a pyproject.toml with a [build-system] and an entry point in "
                f"{PLUGIN_GROUP!r}, and its module")
    if pyproject.is_file():
        try:
            data = tomllib.loads(read_input_text(pyproject, what="pyproject.toml", expected="a small TOML file"))
        except (OSError, ValueError) as exc:  # InputFileError and TOMLDecodeError are ValueErrors
            return f"pyproject.toml cannot be read: {exc}"
        backend = data.get("build-system", {}).get("build-backend")
        if not setup.is_file() and not isinstance(backend, str):
            return "pyproject.toml names no [build-system] build-backend (and there is no setup.py)"
        entry_points = data.get("project", {}).get("entry-points", {})
        if isinstance(data.get("project"), dict) and "entry-points" in data["project"] and (
            PLUGIN_GROUP not in entry_points
        ):
            return f"pyproject.toml declares entry points, but none in {PLUGIN_GROUP!r}: vLLM would never load it"
    if not _has_code(directory):
        return "holds no Python package or module to install"
    return None


def plugin_problems(manifest: Manifest) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    for relative, location in plugin_dirs(manifest).items():
        directory = manifest.resolve(relative)
        if not directory.exists():
            continue  # load_manifest reports a missing directory
        problem = plugin_problem(directory)
        if problem is not None:
            problems.append(ConfigProblem(location=location, message=f"{relative!r} is {problem}"
                                          if problem.startswith("not ") else f"{relative!r}: {problem}"))
    return problems
