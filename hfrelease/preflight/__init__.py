"""The preflight of `hfrelease check`: what would fail on a GPU runner, found before one is allocated.

A manifest that loads can still stop a release after a server has started: a gate's lm-eval task that does
not exist, a misspelt metric or filter key, a log-likelihood task sent to chat completions
(`tasks`); a source without weights or a quant whose checkpoint is another scheme than declared
(`checkpoints`); a thinking gate whose chat template ignores the thinking switch (`template`); a plugin directory
that is not a package (`plugins`); a Hub revision that does not exist or a release tag already taken
(`hub`); a workflow that installs hfrelease from nowhere (`install`). Each is checked from files and one
small Hub request at most, every problem is reported at once (`ConfigProblem`s, exit 3 through
`ConfigError`), and what could not be checked (an unreachable Hub) is said in a note, never as a problem.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.errors import ConfigProblem
from hfrelease.manifest import Manifest

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hfrelease.preflight.tasks import TaskCatalog


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    problems: tuple[ConfigProblem, ...]
    notes: tuple[str, ...]  # what was not checked, and why
    seconds: float


def run_preflight(
    manifest: Manifest,
    *,
    cache_dir: Path | None,
    hub: bool = True,
    catalog: TaskCatalog | None = None,
    api_factory: Callable[[str], HfApi] | None = None,
) -> PreflightReport:
    """Every preflight check of `manifest`. `hub=False` asks the Hub nothing (offline or quick use)."""
    from hfrelease.ci.actions.isolation import workflow_problems
    from hfrelease.ci.install import workflow_install_problems
    from hfrelease.ci.workflows import prerequisites, repository_root
    from hfrelease.preflight.checkpoints import scheme_problems, weights_problems
    from hfrelease.preflight.plugins import plugin_problems
    from hfrelease.preflight.tasks import task_problems
    from hfrelease.preflight.template import thinking_problems

    started = time.monotonic()
    problems: list[ConfigProblem] = [*plugin_problems(manifest)]
    found_tasks, notes = task_problems(manifest, cache_dir=cache_dir, catalog=catalog)
    problems += found_tasks
    fetch = None
    if hub:
        from hfrelease.preflight.hub import hub_checks

        checked = hub_checks(manifest, api_factory=api_factory)
        problems += checked.problems
        notes += checked.notes
        fetch = checked.fetch
    elif any(a.source.hub for a in manifest.artifact) or any(a.publish for a in manifest.artifact):
        notes.append("the Hub was not asked (--offline): Hub revisions, release tags and Hub chat templates "
                     "not checked")
    problems += [*weights_problems(manifest), *scheme_problems(manifest, fetch=fetch)]
    found, unread = thinking_problems(manifest, fetch=fetch)
    problems += found
    if hub:
        notes += unread
    root = repository_root(manifest.root)
    problems += workflow_install_problems(root)
    problems += workflow_problems(root)
    if (root / ".github" / "workflows" / "release.yml").is_file():
        notes += [f"the release workflow needs (not checked): {item}" for item in prerequisites(manifest)]
    return PreflightReport(problems=tuple(problems), notes=tuple(notes), seconds=time.monotonic() - started)


def pre_server_problems(manifest: Manifest, *, artifacts: Sequence[str] = (), gates: Sequence[str] = ()
                        ) -> list[ConfigProblem]:
    """What `eval` checks again before it starts a server, from files only (`check` may not have run where eval
    runs): the selected lm-eval gates' data files (their `task_dir`'s tasks) and the selected quants' schemes
    against their local checkpoints' config. Empty selections mean every gate / artifact."""
    from hfrelease.preflight.checkpoints import scheme_problems
    from hfrelease.preflight.task_data import data_file_problems
    from hfrelease.preflight.tasks import include_catalog

    problems: list[ConfigProblem] = []
    catalogs: dict[str, TaskCatalog] = {}
    for index, gate in enumerate(manifest.gate):
        if gate.task is None or gate.task_dir is None or (gates and gate.id not in gates):
            continue
        directory = manifest.resolve(gate.task_dir)
        if gate.task_dir not in catalogs and directory.is_dir():
            catalogs[gate.task_dir] = include_catalog(directory)
        if gate.task_dir in catalogs:
            problems += data_file_problems(gate, index, catalogs[gate.task_dir].entries)
    chosen = [a for a in manifest.artifact if a.source.path is not None and (not artifacts or a.id in artifacts)]
    problems += scheme_problems(manifest, fetch=None, only={a.id for a in chosen})
    return problems

