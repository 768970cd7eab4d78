"""The lm-eval side of the preflight: each gate's task exists, reports the gate's metric, and fits its `api`.

The installed lm-eval's `TaskManager` indexes every task, group and tag from their YAML files without
loading any data set (`TaskManager(include_path=...).task_index`: name -> kind, YAML path, config with its
includes resolved). From an entry's config follows what lm-eval will report for it: a task reports
`metric,filter` for each metric of its `metric_list` (else lm-eval's defaults for its `output_type`) and
each filter of its `filter_list` (else the single filter `none`); a group reports only what its
`aggregate_metric_list` aggregates; a tag is a set of tasks with no combined score. That is exactly what
the gate runner reads (`hfrelease.evaluation.lm_eval_results.collect`), so a misspelt task, metric or filter
is found here, before a server starts, instead of on a GPU runner.

Indexing lm-eval's own ~15,000 YAML files takes seconds, so the index of the built-in tasks is kept in a
small JSON file per lm-eval installation (version, location and install time); a gate's `task_dir` is
indexed on every run (a few files). What cannot be known without running code (a Python-class task's
metrics) is never reported as a problem.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigProblem
from hfrelease.manifest import Gate, Manifest
from hfrelease.manifest.references import suggest

# lm_eval.api.registry.DEFAULT_METRIC_REGISTRY (0.4.13): the metrics of a task without a metric_list.
_DEFAULT_METRICS = {
    "loglikelihood": ("perplexity", "acc"),
    "loglikelihood_rolling": ("word_perplexity", "byte_perplexity", "bits_per_byte"),
    "multiple_choice": ("acc", "acc_norm"),
    "generate_until": ("exact_match",),
}
_CACHE_FORMAT = 1


@dataclass(frozen=True, kw_only=True)
class TaskCatalog:
    """lm-eval's task index reduced to what a gate needs: name -> {"kind", and the slimmed config}."""

    entries: Mapping[str, Mapping[str, Any]]
    version: str = "?"

    def overlay(self, other: TaskCatalog) -> TaskCatalog:
        """`other`'s entries over these (an include path overrides the built-in tasks, as in lm-eval)."""
        return TaskCatalog(entries={**self.entries, **other.entries}, version=self.version)


@dataclass(kw_only=True)
class _Reported:
    """What lm-eval reports for a name: its metric keys (None: not knowable statically) and output types."""

    keys: set[str] | None = field(default_factory=set)
    output_types: dict[str, str] = field(default_factory=dict)  # leaf task -> output_type


def _metric_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    # `!function utils.score` is kept as "<dir>/utils.score" when functions are not resolved.
    return value.rsplit(".", 1)[-1] if "/" in value else value


def slim(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a task/group config that decide what lm-eval reports (JSON-serializable)."""
    out: dict[str, Any] = {}
    for key in ("group", "output_type"):
        if isinstance(cfg.get(key), str):
            out[key] = cfg[key]
    task = cfg.get("task")
    if isinstance(task, str):
        out["task"] = task if "group" not in cfg else [task]
    elif isinstance(task, list):
        out["task"] = [slim(t) if isinstance(t, Mapping) else str(t) for t in task]
    if "class" in cfg:
        out["class"] = True
    if "include" in cfg:  # an inline entry's include is resolved only when lm-eval builds it
        out["unresolved"] = True
    metrics = cfg.get("metric_list")
    if isinstance(metrics, list):
        names = [_metric_name(m.get("metric")) if isinstance(m, Mapping) else None for m in metrics]
        out["metrics"] = None if None in names else names
    filters = cfg.get("filter_list")
    if isinstance(filters, list):
        names = [f.get("name") if isinstance(f, Mapping) else None for f in filters]
        out["filters"] = names if all(isinstance(n, str) for n in names) else None
    data = cfg.get("dataset_kwargs")
    if isinstance(data, Mapping) and "data_files" in data:  # read by hfrelease.preflight.task_data
        out["data"] = {"path": cfg.get("dataset_path"), "data_files": data["data_files"],
                       "data_dir": data.get("data_dir")}
    aggregate = cfg.get("aggregate_metric_list")
    if isinstance(aggregate, Mapping):
        aggregate = [aggregate]
    if isinstance(aggregate, list):
        out["aggregate"] = [
            {"metric": a.get("metric"),
             "filters": [a["filter_list"]] if isinstance(a.get("filter_list"), str) else a.get("filter_list")}
            for a in aggregate if isinstance(a, Mapping) and isinstance(a.get("metric"), str)
        ]  # fmt: skip
    return out


def _from_index(index: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in index.items():
        kind = entry.kind.name.lower()  # TASK, PY_TASK, GROUP, TAG
        if kind == "tag":
            entries[name] = {"kind": "tag", "members": sorted(entry.tags)}
        else:
            entries[name] = {"kind": kind, **slim(entry.cfg or {})}
            if "data" in entries[name] and entry.yaml_path is not None:
                entries[name]["data"]["yaml"] = str(entry.yaml_path)
    return entries


def _lm_eval_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("lm_eval")


def _builtin_key() -> tuple[str, Path]:
    """(cache key, tasks directory) of the installed lm-eval, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("lm_eval")
    tasks = Path(spec.origin).parent / "tasks"
    stamp = f"{_lm_eval_version()}|{tasks}|{tasks.stat().st_mtime_ns}|{(tasks / '__init__.py').stat().st_mtime_ns}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:16], tasks


def builtin_catalog(cache_dir: Path | None) -> TaskCatalog:
    """lm-eval's built-in tasks, from the cache file when this installation was indexed before."""
    key, _ = _builtin_key()
    version = _lm_eval_version()
    path = cache_dir / f"lm-eval-tasks-{key}.json" if cache_dir is not None else None
    if path is not None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") == _CACHE_FORMAT:
                return TaskCatalog(entries=data["entries"], version=version)
        except (OSError, ValueError, KeyError):
            pass  # absent or damaged: index again
    from lm_eval.tasks import TaskManager

    entries = _from_index(TaskManager().task_index)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch = path.with_suffix(f".{os.getpid()}.tmp")
            scratch.write_text(json.dumps({"format": _CACHE_FORMAT, "entries": entries}, default=str), encoding="utf-8")
            scratch.replace(path)
        except OSError:
            pass  # a read-only home: the next run indexes again
    return TaskCatalog(entries=entries, version=version)


def include_catalog(task_dir: Path) -> TaskCatalog:
    """The tasks of one include path (a gate's `task_dir`), indexed as lm-eval indexes it."""
    from lm_eval.tasks import TaskManager

    return TaskCatalog(entries=_from_index(TaskManager(include_path=str(task_dir), include_defaults=False).task_index))


def _merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key in ("output_type", "metrics", "filters", "unresolved"):
        if key in overrides:
            merged[key] = overrides[key]
    return merged


def _leaf(name: str, cfg: Mapping[str, Any]) -> _Reported:
    if cfg.get("class") or cfg.get("unresolved"):
        return _Reported(keys=None)
    output_type = cfg.get("output_type", "generate_until")
    metrics = cfg.get("metrics") if "metrics" in cfg else list(_DEFAULT_METRICS.get(output_type, ()))
    filters = cfg.get("filters") if "filters" in cfg else ["none"]
    keys = None if metrics is None or filters is None else {f"{m},{f}" for m in metrics for f in filters}
    return _Reported(keys=keys, output_types={name: output_type})


def _leaves(catalog: TaskCatalog, members: Iterable[Any], overrides: Mapping[str, Any], seen: frozenset[str]
            ) -> list[_Reported]:
    """What every leaf task of a group's `task:` list reports (lm_eval.tasks._factory._build_group_members)."""
    found: list[_Reported] = []
    for item in members:
        extra: Mapping[str, Any] = overrides
        if isinstance(item, Mapping):
            if "group" in item:
                name = item["group"]
                entry = catalog.entries.get(name)
                cfg = entry if entry is not None and entry.get("kind") == "group" else item
                found += _leaves(catalog, cfg.get("task", []), _merge(overrides, item), seen | {name})
                continue
            name, extra = item.get("task", ""), _merge(overrides, item)
        else:
            name = item
        entry = catalog.entries.get(name)
        if name in seen:
            continue
        if entry is None:  # an inline task defined by the item itself (its fields are in `extra`)
            found.append(_leaf(name, extra) if isinstance(item, Mapping) else _Reported(keys=None))
        elif entry["kind"] == "group":
            found += _leaves(catalog, entry.get("task", []), extra, seen | {name})
        elif entry["kind"] == "tag":
            for member in entry.get("members", []):
                sub = catalog.entries.get(member)
                if sub is not None:
                    found.append(_leaf(member, _merge(sub, extra)))
        else:
            found.append(_leaf(name, _merge(entry, extra)))
    return found


def reported(catalog: TaskCatalog, name: str) -> _Reported:
    """The `metric,filter` keys lm-eval reports for `name` as a whole, and the output types of its tasks."""
    entry = catalog.entries[name]
    if entry["kind"] != "group":
        return _leaf(name, entry)
    group_overrides = {k: v for k, v in entry.items() if k in ("output_type", "metrics", "filters")}
    leaves = _leaves(catalog, entry.get("task", []), group_overrides, frozenset({name}))
    types = {task: kind for leaf in leaves for task, kind in leaf.output_types.items()}
    if any(leaf.keys is None for leaf in leaves):
        return _Reported(keys=None, output_types=types)
    produced = set().union(*(leaf.keys or set() for leaf in leaves))
    keys: set[str] = set()
    for aggregate in entry.get("aggregate", []):  # lm_eval.api.group.Group.aggregate
        metric = aggregate["metric"]
        filters = aggregate.get("filters")
        if filters is None:  # discovered from the children's results
            filters = [k.split(",", 1)[1] for k in produced if k.split(",", 1)[0] == metric]
        keys |= {f"{metric},{f}" for f in filters if f"{metric},{f}" in produced}
    return _Reported(keys=keys, output_types=types)


def gate_problems(gate: Gate, index: int, catalog: TaskCatalog, *, task_dir: str | None) -> list[ConfigProblem]:
    """A gate's task, metric and api against lm-eval's index (with the gate's task_dir included)."""
    assert gate.task is not None
    where = f"gate[{index}]"
    entry = catalog.entries.get(gate.task)
    if entry is None:
        searched = f"lm-eval {catalog.version}" + (f" or task_dir {task_dir!r}" if task_dir else "")
        return [ConfigProblem(location=f"{where}.task", message=f"{searched} has no task, group or tag "
                              f"{gate.task!r}", suggestion=suggest(gate.task, list(catalog.entries)))]
    if entry["kind"] == "tag":
        return [ConfigProblem(location=f"{where}.task", message=f"{gate.task!r} is an lm-eval tag (a set of "
                              f"{len(entry.get('members', []))} tasks with no combined score): name a group or one "
                              "of its tasks")]
    problems: list[ConfigProblem] = []
    found = reported(catalog, gate.task)
    if found.keys is not None and gate.metric not in found.keys:
        listing = ", ".join(sorted(found.keys)) or "nothing: a group without aggregate_metric_list has no score"
        problems.append(ConfigProblem(
            location=f"{where}.metric",
            message=f"task {gate.task!r} reports no {gate.metric!r} (lm-eval names a score \"metric,filter\"; "
                    f"it reports: {listing})",
            suggestion=suggest(gate.metric, sorted(found.keys)) or _same_metric(gate.metric, found.keys)))
    scored = sorted({kind for kind in found.output_types.values() if kind != "generate_until"})
    if gate.api == "chat" and scored:
        problems.append(ConfigProblem(
            location=f"{where}.api",
            message=f"task {gate.task!r} is a {'/'.join(scored)} task: chat completions return text, not "
                    "log-likelihoods; set api = \"completions\""))
    return problems


def _same_metric(metric: str, keys: set[str]) -> str | None:
    name = metric.split(",", 1)[0]
    matches = sorted(k for k in keys if k.split(",", 1)[0] == name)
    return matches[0] if matches else None


def task_problems(manifest: Manifest, *, cache_dir: Path | None, catalog: TaskCatalog | None = None,
                  ) -> tuple[list[ConfigProblem], list[str]]:
    """Every lm-eval gate of the manifest checked (problems, notes); custom-command and entry-point gates have
    no task."""
    from hfrelease.preflight.task_data import data_file_problems

    gates = [(i, g) for i, g in enumerate(manifest.gate) if g.task is not None]
    if not gates:
        return [], []
    try:
        base = catalog if catalog is not None else builtin_catalog(cache_dir)
    except ModuleNotFoundError:  # a CI runner with hfrelease installed without its dependencies
        return [], ["lm-eval is not installed here: gates' tasks and metrics not checked"]
    by_dir: dict[str | None, TaskCatalog] = {None: base}
    problems: list[ConfigProblem] = []
    for index, gate in gates:
        if gate.task_dir not in by_dir:
            directory = manifest.resolve(gate.task_dir or "")
            if not directory.is_dir():
                continue  # load_manifest reports the missing directory
            by_dir[gate.task_dir] = base.overlay(include_catalog(directory))
        problems += gate_problems(gate, index, by_dir[gate.task_dir], task_dir=gate.task_dir)
        problems += data_file_problems(gate, index, by_dir[gate.task_dir].entries)
    return problems, []
