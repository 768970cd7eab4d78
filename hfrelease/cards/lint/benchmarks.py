"""The lint's benchmark rule: each `.eval_results` task id is a task of its benchmark's own eval definition.

The Hub files a result under a Benchmark dataset's leaderboard by `dataset.id` and `dataset.task_id`, the id
of "the Task, as defined in the dataset's eval.yaml" (https://huggingface.co/docs/hub/eval-results): the
benchmark's `eval.yaml` lists its tasks (`tasks: [{id: ...}, ...]`), and a result whose task id is not
among them lands on no leaderboard. `frontmatter.BENCHMARKS` holds the ids hfrelease writes; this rule reads
each benchmark's `eval.yaml` from the Hub (huggingface_hub's client and cache, at the entry's `revision`
when it names one) and holds every written id to it. A dataset with no `eval.yaml` is no Benchmark. When
the Hub cannot be reached (offline, not cached) the id is not checked: nothing to check it against.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

EVAL_DEFINITION = "eval.yaml"  # where a Benchmark dataset defines its tasks


class NoDefinition(str):
    """Why a dataset has no eval definition to read (it is no registered Benchmark)."""


@cache  # once per benchmark in a process: a family's cards share their benchmarks
def benchmark_tasks(dataset: str, revision: str | None = None, *, endpoint: str | None = None) -> (
        frozenset[str] | NoDefinition | None):
    """The task ids `dataset`'s `eval.yaml` defines; `NoDefinition` when it has none (no such dataset, file
    or revision); None when the Hub cannot be asked."""
    import yaml
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        path = hf_hub_download(dataset, EVAL_DEFINITION, repo_type="dataset", revision=revision, endpoint=endpoint)
    # Two of huggingface_hub's errors subclass the ones that mean "no such file": LocalEntryNotFoundError (an
    # EntryNotFoundError) is raised when it could not reach the Hub (offline mode, a failed HEAD:
    # huggingface_hub#985) and the file is not cached; GatedRepoError (a RepositoryNotFoundError) when the
    # benchmark is gated (Idavidrein/gpqa is) and the token has not accepted its terms. Neither says the
    # definition is missing, so they go first.
    except (LocalEntryNotFoundError, GatedRepoError):
        return None
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        return NoDefinition(f"{type(exc).__name__}")
    except (HfHubHTTPError, OSError):  # a 5xx, a connection reset: the Hub is out of reach, not the dataset wrong
        return None
    definition: Any = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    tasks = definition.get("tasks") if isinstance(definition, Mapping) else None
    return frozenset(str(t["id"]) for t in tasks or [] if isinstance(t, Mapping) and "id" in t)


def eval_result_tasks(directory: Path, *, endpoint: str | None = None) -> list[str]:
    """Each `.eval_results/<gate>.yaml` entry of a card's directory whose task id its benchmark does not
    define, named by the gate (the file's stem), with the ids the benchmark does define."""
    import yaml

    problems = []
    for path in sorted((directory / ".eval_results").glob("*.yaml")):
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in entries if isinstance(entries, list) else [entries]:
            dataset = entry.get("dataset") if isinstance(entry, Mapping) else None
            if not isinstance(dataset, Mapping) or not isinstance(dataset.get("id"), str):
                continue  # the schema rule (lint/metadata.py) reports it
            revision = dataset.get("revision")
            tasks = benchmark_tasks(dataset["id"], str(revision) if revision else None, endpoint=endpoint)
            where = f"{path}: gate {path.stem!r}"
            if isinstance(tasks, NoDefinition):
                problems.append(f"{where}: {dataset['id']} has no {EVAL_DEFINITION} ({tasks}): it is no Hub "
                                "Benchmark, so the result lands on no leaderboard")
            elif tasks is not None and dataset.get("task_id") not in tasks:
                problems.append(f"{where}: task_id {dataset.get('task_id')!r} is not a task of {dataset['id']}'s "
                                f"{EVAL_DEFINITION} (its tasks: {', '.join(sorted(tasks)) or 'none'})")
    return problems
