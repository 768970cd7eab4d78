"""Check a `vllm_plugin/` before it ships: it installs, and it registers with vLLM's plugin group.

vLLM loads out-of-tree plugins through the `vllm.general_plugins` entry-point group; a plugin that
installs but declares no such entry point is silently never loaded, and the repo's "serve with this
plugin" instructions would then be wrong. The check installs exactly the files being bundled, with
`pip install --no-deps`, into a throwaway target directory (the plugin's own source tree is left alone:
an in-tree build would drop `build/` and `*.egg-info` there), then reads the installed metadata. Plugin
code is not imported: that would import vLLM, and the check must be cheap enough to run on every bundle.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hfrelease import shell
from hfrelease.errors import ExitCode, HfreleaseError
from hfrelease.redact import public_environment, seal_environment

PLUGIN_GROUP = "vllm.general_plugins"


class PluginCheckError(HfreleaseError):
    """The plugin directory does not install, or installs without registering with vLLM."""

    exit_code = ExitCode.CONFIG


@dataclass(frozen=True, kw_only=True)
class PluginReport:
    directory: Path
    distribution: str
    entry_points: tuple[str, ...]  # "name = module:attr"


PluginChecker = Callable[[Path, Sequence[str]], PluginReport]


def check_plugin(
    directory: Path,
    files: Sequence[str],
    *,
    python: str = sys.executable,
    runner: shell.Runner = subprocess.run,
    env: Mapping[str, str] | None = None,
) -> PluginReport:
    """Install `files` (paths relative to `directory`) into a temp target and read their entry points."""
    if not {"pyproject.toml", "setup.py"} & set(files):
        raise PluginCheckError(
            f"{directory} is not an installable package (no pyproject.toml or setup.py)",
            hint="[serve].plugin must name a pip-installable package whose entry point is in the "
            f"`{PLUGIN_GROUP}` group.",
        )
    source_env = os.environ if env is None else env
    # The plugin's build backend runs arbitrary code: it gets no credentials, and cannot read them from this
    # process's /proc/<pid>/environ either (`seal_environment`; the values stay in os.environ for this process).
    seal_environment()
    clean_env = public_environment(source_env)
    clean_env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    with tempfile.TemporaryDirectory(prefix="hfrelease-plugin-") as scratch:
        source, target = Path(scratch) / "src", Path(scratch) / "env"
        for relative in files:
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(directory / relative, source / relative)
        # --no-build-isolation and --no-index: the check needs no package index (CI, air-gapped runners),
        # like the serving stage's install of the same plugin.
        shell.run(
            [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
             "--target", str(target), str(source)],
            env=clean_env, error=PluginCheckError, what=f"installing the vLLM plugin {directory}",
            hint="The plugin must be pip-installable with the build backend already in this environment; "
            "run the pip command above by hand to see why not.", runner=runner,
        )  # fmt: skip
        return _read_entry_points(directory, target)


def _read_entry_points(directory: Path, target: Path) -> PluginReport:
    distributions = list(importlib.metadata.distributions(path=[str(target)]))
    if not distributions:
        raise PluginCheckError(f"{directory}: pip installed no distribution", hint="Check the plugin's pyproject.toml.")
    found: list[str] = []
    for dist in distributions:
        for entry in dist.entry_points:
            if entry.group != PLUGIN_GROUP:
                continue
            top = entry.module.split(".", 1)[0]
            if importlib.machinery.PathFinder.find_spec(top, [str(target)]) is None:
                raise PluginCheckError(
                    f"{directory}: entry point {entry.name} = {entry.value} names module {entry.module}, "
                    "which the installed package does not contain",
                    hint="List the module's package in [tool.setuptools] packages (or your backend's equivalent).",
                )
            found.append(f"{entry.name} = {entry.value}")
    if not found:
        raise PluginCheckError(
            f"{directory}: the package installs but registers nothing with vLLM",
            hint=f'Add [project.entry-points."{PLUGIN_GROUP}"] with name = "module:register" to pyproject.toml.',
        )
    return PluginReport(directory=directory, distribution=distributions[0].metadata["Name"], entry_points=tuple(found))
