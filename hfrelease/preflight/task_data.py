"""A gate task's local data files exist where lm-eval will look for them.

lm-eval hands a task's `dataset_kwargs` to `datasets.load_dataset(path=dataset_path, **dataset_kwargs)`
unchanged (lm_eval.api.task.ConfigurableTask.download, 0.4.x). For a packaged builder (`dataset_path: json`,
`csv`, `parquet`, ...) `datasets` resolves `data_files` against `data_dir`, else the *current working
directory* (datasets.load.PackagedDatasetModuleFactory: `base_path = Path(data_dir or "").resolve()`), not
the task YAML's directory. A task written with paths relative to its YAML therefore fails only once a vLLM
server has started and lm-eval builds the task. Here each local path (or glob) is resolved by the same rule
from the directory `hfrelease check` runs in, which is where `hfrelease eval` runs in the workflow.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigProblem
from hfrelease.manifest import Gate

# datasets.packaged_modules._PACKAGED_DATASETS_MODULES (4.x), where `datasets` is not importable here.
_PACKAGED = frozenset({"csv", "json", "pandas", "parquet", "arrow", "text", "imagefolder", "audiofolder",
                       "videofolder", "pdffolder", "niftifolder", "webdataset", "xml", "hdf5", "eval", "lance"})


def _packaged() -> frozenset[str]:
    try:
        from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES
    except ImportError:
        return _PACKAGED
    return frozenset(_PACKAGED_DATASETS_MODULES)


def _named(data_files: Any) -> Iterator[tuple[str, str]]:
    """(key as written, path) of every path in a `data_files` value (a path, a list, or split -> either)."""
    if isinstance(data_files, str):
        yield "data_files", data_files
    elif isinstance(data_files, list):
        for pos, item in enumerate(data_files):
            if isinstance(item, str):
                yield f"data_files[{pos}]", item
    elif isinstance(data_files, Mapping):
        for split, value in data_files.items():
            for key, path in _named(value):
                yield key.replace("data_files", f"data_files.{split}", 1), path


def _found(pattern: Path) -> bool:
    """Whether a path exists or a pattern matches something (datasets.data_files.resolve_pattern's rule)."""
    text = str(pattern)
    if not any(c in text for c in "*?["):
        return pattern.exists()
    return bool(glob.glob(text, recursive=True))  # noqa: PTH207 - the pattern may be absolute and span directories


def _leaf_names(catalog_entries: Mapping[str, Mapping[str, Any]], name: str, seen: frozenset[str]) -> Iterator[str]:
    entry = catalog_entries.get(name)
    if entry is None or name in seen:
        return
    if entry.get("kind") != "group":
        yield name
        return
    for member in entry.get("task", []):
        member_name = member if isinstance(member, str) else None
        if member_name is not None:
            yield from _leaf_names(catalog_entries, member_name, seen | {name})


def data_file_problems(gate: Gate, index: int, entries: Mapping[str, Mapping[str, Any]], *, cwd: Path | None = None
                       ) -> list[ConfigProblem]:
    """Every local `data_files` path of the gate's task (or its group's tasks) that lm-eval would not find;
    `entries` is a `TaskCatalog`'s (hfrelease.preflight.tasks)."""
    assert gate.task is not None
    here = (cwd or Path.cwd()).resolve()
    packaged = _packaged()
    problems: list[ConfigProblem] = []
    for name in dict.fromkeys(_leaf_names(entries, gate.task, frozenset())):
        data = entries[name].get("data")
        if not isinstance(data, Mapping) or data.get("path") not in packaged:
            continue  # a Hub data set or a local directory: its files are relative to it
        base = here / data["data_dir"] if isinstance(data.get("data_dir"), str) else here
        yaml = Path(data["yaml"]) if isinstance(data.get("yaml"), str) else None
        for key, path in _named(data.get("data_files")):
            if "://" in path or _found(base / Path(path).expanduser()):
                continue
            beside = yaml.parent / path if yaml is not None else None
            moved = os.path.relpath(beside.resolve(), base) if beside is not None and _found(beside) else None
            fix = ("; write it relative to that directory, or absolute" if moved is None
                   else f"; it is there relative to the YAML: write {moved!r} (relative to {base}) or an absolute path")
            where = f" ({yaml})" if yaml is not None else ""
            problems.append(ConfigProblem(
                location=f"gate[{index}].task",
                message=f"task {name!r}{where}: dataset_kwargs.{key} {path!r} does not exist in {base}: lm-eval "
                        f"passes data_files to datasets.load_dataset({data['path']!r}), which resolves a relative "
                        f"path against the current directory (or data_dir), not the task YAML's directory{fix}",
                suggestion=moved))
    return problems
