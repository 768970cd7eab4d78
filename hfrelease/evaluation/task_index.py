"""lm-eval's index of its own tasks, built once per process instead of once per gate.

Every `TaskManager` lm-eval makes reads all ~15,000 task YAML files of its installation again (lm-eval 0.4.13,
`lm_eval/tasks/manager.py`: `TaskIndex.build` over its own directory, then the include path): 7 s of CPU on
a 2-core machine, 15 s of wall time when a vLLM server shares it, for every gate (upstream's report of the slow
`TaskManager.__init__`: https://github.com/EleutherAI/lm-evaluation-harness/pull/2777). Its index is built root by
root, each root's entries on their own, then merged in order (a later root's task overrides an earlier
one's), so the part of lm-eval's own directory, which does not change while a process runs, can be built
once and merged with the include path's part as lm-eval would. `install()` makes lm-eval's task manager
do that; the gate processes' forkserver builds the part before it forks any gate (`warm`), so every gate
starts with it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger("lm_eval.tasks._index")  # where lm-eval says that a task overrides another


@cache
def _own_root() -> Path:
    import lm_eval.tasks.manager

    return Path(lm_eval.tasks.manager.__file__).parent


@cache
def _root_index(root: Path) -> dict[str, Any]:
    """lm-eval's index of one root of task YAML files (only lm-eval's own directory is kept)."""
    from lm_eval.tasks._index import TaskIndex

    return dict(TaskIndex.build([root]))


def install() -> None:
    """Make lm-eval's task managers reuse the index of lm-eval's own tasks (idempotent)."""
    import lm_eval.tasks.manager
    from lm_eval.tasks._index import TaskIndex

    if getattr(lm_eval.tasks.manager.TaskIndex, "keeps_own_tasks", False):
        return
    own = _own_root()

    class OwnTasksKept(TaskIndex):  # type: ignore[misc]
        keeps_own_tasks = True

        @staticmethod
        def build(paths: Iterable[Path], *, resolve_includes: bool = True) -> dict[str, Any]:
            roots = [Path(p) for p in paths]
            if not resolve_includes or own not in roots:
                return dict(TaskIndex.build(roots, resolve_includes=resolve_includes))
            index: dict[str, Any] = {}
            for root in roots:
                part = _root_index(own) if root == own else TaskIndex.build([root])
                for name, entry in part.items():
                    if name in index:
                        log.warning("Task '%s' from %s overrides existing task from %s", name, entry.yaml_path,
                                    index[name].yaml_path)
                    index[name] = entry
            return index

    lm_eval.tasks.manager.TaskIndex = OwnTasksKept


def warm() -> None:
    """Build the index of lm-eval's own tasks now (the forkserver, before it forks the gates)."""
    install()
    _root_index(_own_root())
