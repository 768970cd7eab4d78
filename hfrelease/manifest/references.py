"""Checks that relate several parts of a manifest: ids, cross-references, and files on disk.

They read the raw TOML data rather than the typed `Manifest`, so they still run when some unrelated
field failed to validate: `hfrelease check` reports every problem of a manifest in one go. Anything
of the wrong type here is skipped silently, because the schema validation already reports it.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigProblem
from hfrelease.manifest.fields import repo_id_problem
from hfrelease.manifest.input_files import MAX_WORKLOAD_BYTES

_TABLES = ("artifact", "gate", "speculative", "workload")


def _entries(data: Mapping[str, Any], table: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    items = data.get(table)
    if isinstance(items, list):
        for index, item in enumerate(items):
            if isinstance(item, Mapping):
                yield index, item


def _ids(data: Mapping[str, Any], table: str) -> dict[str, Mapping[str, Any]]:
    return {
        item["id"]: item for _, item in _entries(data, table) if isinstance(item.get("id"), str)
    }


def suggest(name: str, candidates: list[str]) -> str | None:
    """The candidate `name` was probably meant to be: a close spelling, or a prefix/extension of it."""
    nearest = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if nearest:
        return nearest[0]
    lowered = name.lower()
    for candidate in candidates:
        if len(candidate) >= 3 and (lowered.startswith(candidate) or candidate.startswith(lowered)):
            return candidate
    return None


def _unknown_id(location: str, what: str, name: str, known: list[str]) -> ConfigProblem:
    listing = ", ".join(sorted(known)) or "none declared"
    return ConfigProblem(
        location=location,
        message=f"no {what} with id {name!r} (known: {listing})",
        suggestion=suggest(name, known),
    )


def check_references(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """Duplicate ids, the single reference, and every id one table uses to name an entry of another."""
    return [
        *_duplicate_ids(data),
        *_artifact_references(data),
        *_speculative_references(data),
        *_selection_references(data),
    ]


def _duplicate_ids(data: Mapping[str, Any]) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    for table in _TABLES:
        seen: dict[str, int] = {}
        for index, item in _entries(data, table):
            ident = item.get("id")
            if isinstance(ident, str):
                if ident in seen:
                    problems.append(
                        ConfigProblem(
                            location=f"{table}[{index}].id",
                            message=f"duplicate id {ident!r} (also {table}[{seen[ident]}])",
                        )
                    )
                else:
                    seen[ident] = index
    return problems


def _artifact_references(data: Mapping[str, Any]) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    artifacts = _ids(data, "artifact")
    artifact_ids = list(artifacts)
    references = [i for i, a in _entries(data, "artifact") if a.get("kind") == "reference"]
    if isinstance(data.get("artifact"), list) and len(references) != 1:
        problems.append(
            ConfigProblem(
                location="artifact",
                message=f"a family has exactly one artifact of kind 'reference', found {len(references)}",
            )
        )

    repos: dict[str, int] = {}
    for index, item in _entries(data, "artifact"):
        repo = item.get("repo")
        if isinstance(repo, str):
            if repo in repos:
                problems.append(
                    ConfigProblem(
                        location=f"artifact[{index}].repo",
                        message=f"repo {repo!r} is also artifact[{repos[repo]}]'s: one repo per artifact",
                    )
                )
            repos.setdefault(repo, index)
        draft = item.get("draft")
        if isinstance(draft, Mapping) and isinstance(draft.get("target"), str):
            target = draft["target"]
            where = f"artifact[{index}].draft.target"
            if target not in artifacts:
                problems.append(_unknown_id(where, "artifact", target, artifact_ids))
            elif artifacts[target].get("kind") == "draft":
                problems.append(
                    ConfigProblem(location=where, message=f"{target!r} is itself a draft; a draft's target "
                                  "must be a reference, quant or variant artifact")
                )
            elif target == item.get("id"):
                problems.append(ConfigProblem(location=where, message="a draft cannot target itself"))
        matrix = draft.get("matrix") if isinstance(draft, Mapping) else None
        for position, name in enumerate(matrix if isinstance(matrix, list) else []):
            # The draft x target matrix's named targets: artifacts that can serve a draft (not drafts).
            where = f"artifact[{index}].draft.matrix[{position}]"
            if isinstance(name, str) and name not in artifacts:
                problems.append(_unknown_id(where, "artifact", name, artifact_ids))
            elif isinstance(name, str) and artifacts[name].get("kind") == "draft":
                problems.append(ConfigProblem(location=where, message=f"{name!r} is a draft, not a target"))
    return problems


def _speculative_references(data: Mapping[str, Any]) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    artifacts = _ids(data, "artifact")
    artifact_ids = list(artifacts)
    for index, item in _entries(data, "speculative"):
        draft_id = item.get("draft")
        if isinstance(draft_id, str):
            where = f"speculative[{index}].draft"
            if draft_id not in artifacts:
                problems.append(_unknown_id(where, "artifact", draft_id, artifact_ids))
            else:
                draft_artifact = artifacts[draft_id]
                if draft_artifact.get("kind") != "draft":
                    problems.append(
                        ConfigProblem(location=where, message=f"{draft_id!r} is not an artifact of kind 'draft'")
                    )
                spec = draft_artifact.get("draft")
                method = item.get("method")
                if isinstance(spec, Mapping) and isinstance(method, str) and spec.get("method") not in (None, method):
                    problems.append(
                        ConfigProblem(
                            location=f"speculative[{index}].method",
                            message=f"{method!r} does not match the draft artifact's method "
                            f"{spec.get('method')!r}",
                        )
                    )
    return problems


def _selection_references(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """Ids that gates and workloads use to choose artifacts and speculative configs."""
    problems: list[ConfigProblem] = []
    artifacts = _ids(data, "artifact")
    artifact_ids = list(artifacts)
    speculative_ids = [*_ids(data, "speculative"), "none"]
    servable = [i for i, a in artifacts.items() if a.get("kind") in ("reference", "quant", "variant")]
    for table in ("gate", "workload"):
        for index, item in _entries(data, table):
            chosen = item.get("artifacts")
            if isinstance(chosen, list):
                for pos, name in enumerate(chosen):
                    if not isinstance(name, str):
                        continue
                    where = f"{table}[{index}].artifacts[{pos}]"
                    if name not in artifacts:
                        problems.append(_unknown_id(where, "artifact", name, artifact_ids))
                    elif name not in servable:
                        problems.append(
                            ConfigProblem(
                                location=where,
                                message=f"{name!r} is a draft: {table}s run on reference, quant and variant "
                                "artifacts (a draft is measured through a speculative config)",
                            )
                        )
    for index, item in _entries(data, "workload"):
        chosen = item.get("speculative")
        if isinstance(chosen, list):
            for pos, name in enumerate(chosen):
                if isinstance(name, str) and name not in speculative_ids:
                    problems.append(
                        _unknown_id(f"workload[{index}].speculative[{pos}]", "speculative config", name,
                                    speculative_ids)
                    )
    return problems + _own_head_references(data)


def _own_head_references(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """A config gated against the reference's acceptance (`min_acceptance_vs_reference`) is listed only by
    workloads measured on the reference: elsewhere there is nothing to compare with."""
    references = [i for i, a in _ids(data, "artifact").items() if a.get("kind") == "reference"]
    gated = {i for i, s in _ids(data, "speculative").items() if s.get("min_acceptance_vs_reference") is not None}
    problems: list[ConfigProblem] = []
    for index, item in _entries(data, "workload"):
        chosen, measured = item.get("speculative"), item.get("artifacts")
        if not isinstance(chosen, list) or not isinstance(measured, list) or not references:
            continue  # without `artifacts`, a workload is measured on every servable artifact, the reference too
        for name in sorted(gated & {c for c in chosen if isinstance(c, str)}):
            if references[0] not in measured:
                problems.append(ConfigProblem(
                    location=f"workload[{index}].artifacts",
                    message=f"lists {name!r}, gated against the reference's acceptance "
                            f"(min_acceptance_vs_reference), but is not measured on the reference "
                            f"{references[0]!r}: add it to artifacts"))
    return problems


def check_repo_ids(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """Repo ids that the schema accepts as strings but that are not Hub repo ids are reported there;
    this adds the family-level rule that published repos belong to the family's owner."""
    problems: list[ConfigProblem] = []
    family = data.get("family")
    owner = family.get("owner") if isinstance(family, Mapping) else None
    for index, item in _entries(data, "artifact"):
        repo = item.get("repo")
        publish = item.get("publish", True)
        if (
            isinstance(repo, str)
            and isinstance(owner, str)
            and publish is True
            and repo_id_problem(repo) is None
            and repo.split("/")[0] != owner
        ):
            problems.append(
                ConfigProblem(
                    location=f"artifact[{index}].repo",
                    message=f"{repo!r} is published by this family but is not under its owner {owner!r} "
                    "(set publish = false for an artifact someone else publishes)",
                )
            )
    return problems


def _path_problem(root: Path, value: object, *, want: str, location: str, limit: int | None = None,
                  ) -> ConfigProblem | None:
    if not isinstance(value, str) or not value or "\x00" in value:
        return None  # the schema reports it
    path = root / value
    try:
        ok = path.is_dir() if want == "directory" else path.is_file()
        exists = path.exists()
        size = path.stat().st_size if ok and limit is not None else 0
    except (OSError, ValueError) as exc:
        return ConfigProblem(location=location, message=f"cannot read {value!r}: {exc}")
    if limit is not None and size > limit:
        return ConfigProblem(location=location, message=f"{value!r} is {size} bytes: hfrelease reads it whole, "
                                                        f"and reads at most {limit} bytes")
    if ok:
        return None
    if exists:
        return ConfigProblem(location=location, message=f"{value!r} is not a {want}")
    return ConfigProblem(location=location, message=f"{want} {value!r} does not exist (relative to {root})")


# The most entries a directory hfrelease reads through (a gate's task_dir, a plugin) may hold: lm-eval indexes
# every YAML file under a task_dir and hfrelease hashes every file, so a tree this large is a wrong path.
MAX_TREE_ENTRIES = 20_000


def _tree_problem(root: Path, value: object, *, location: str) -> ConfigProblem | None:
    """A directory whose files are read (hashed by hfrelease, indexed by lm-eval) holds only regular files and
    directories: opening a FIFO blocks for ever (`check` hung on one in a task_dir) and a device reads without
    end. Its links are followed, as its readers follow them."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    top = root / value
    if not top.is_dir():
        return None  # _path_problem reports it
    odd: list[str] = []
    count = 0
    for directory, subdirs, names in os.walk(top, followlinks=False):
        for name in (*subdirs, *names):
            count += 1
            if count > MAX_TREE_ENTRIES:
                return ConfigProblem(location=location, message=f"{value!r} holds more than {MAX_TREE_ENTRIES:,} "
                                                                "files and directories: is it the right directory?")
            path = Path(directory) / name
            try:
                mode = path.stat().st_mode  # through a link: what a reader opening it meets
            except OSError:
                odd.append(f"{path.relative_to(top)} (a broken link)")
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                odd.append(str(path.relative_to(top)))
    if odd:
        shown = ", ".join(sorted(odd)[:5]) + (" ..." if len(odd) > 5 else "")
        entries = "entry" if len(odd) == 1 else "entries"
        return ConfigProblem(location=location, message=f"{value!r} holds {len(odd)} {entries} that are not regular "
                                                        f"files or directories ({shown}): a FIFO or device would "
                                                        "block or never end a read")
    return None


def check_paths(data: Mapping[str, Any], root: Path) -> list[ConfigProblem]:
    """Every file and directory the manifest names exists, relative to the manifest's directory."""
    found: list[ConfigProblem | None] = []
    serve = data.get("serve")
    if isinstance(serve, Mapping):
        found.append(_path_problem(root, serve.get("plugin"), want="directory", location="serve.plugin"))
        found.append(_tree_problem(root, serve.get("plugin"), location="serve.plugin"))
    for index, item in _entries(data, "artifact"):
        where = f"artifact[{index}]"
        source = item.get("source")
        if isinstance(source, Mapping):
            found.append(_path_problem(root, source.get("path"), want="directory", location=f"{where}.source.path"))
        art_serve = item.get("serve")
        if isinstance(art_serve, Mapping):
            found.append(
                _path_problem(root, art_serve.get("plugin"), want="directory", location=f"{where}.serve.plugin")
            )
        quant = item.get("quantization")
        if isinstance(quant, Mapping):
            found.append(
                _path_problem(root, quant.get("recipe"), want="file", location=f"{where}.quantization.recipe")
            )
        files = item.get("files")
        if isinstance(files, list):
            for pos, name in enumerate(files):
                found.append(_path_problem(root, name, want="file", location=f"{where}.files[{pos}]"))
    for index, item in _entries(data, "gate"):
        found.append(_path_problem(root, item.get("task_dir"), want="directory", location=f"gate[{index}].task_dir"))
        found.append(_tree_problem(root, item.get("task_dir"), location=f"gate[{index}].task_dir"))
    for index, item in _entries(data, "workload"):
        found.append(_path_problem(root, item.get("prompts"), want="file", location=f"workload[{index}].prompts",
                                   limit=MAX_WORKLOAD_BYTES))
    return [p for p in found if p is not None]
