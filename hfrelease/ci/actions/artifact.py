"""The artifacts of one workflow run: `actions/upload-artifact@v4` and `actions/download-artifact@v4`.

The only way state passes between the rehearsal's jobs, with the semantics those actions implement
(read from their sources: upload-artifact `src/shared/search.ts` and `src/upload/`, download-artifact
`src/download-artifact.ts`, and `@actions/glob` in actions/toolkit):

upload
- `path` is one pattern a line (`#` comments, `!` excludes, `~` for home), relative to the workspace;
  `*` `?` `[...]` match within one path segment, `**` any number of them; patterns match dotfiles.
- A directory matched (e.g. `results/`) means every file below it; directories themselves are not uploaded,
  so empty directories are lost. Symbolic links are followed; broken ones are left out.
- Hidden files are left out -- any file or directory whose *name* starts with `.`, and everything below
  such a directory -- unless `include-hidden-files: true` (upload-artifact >= 4.4.0).
- The artifact's root: the search path of the pattern (the part before its first wildcard) when there is
  one; with several, their least common ancestor; a single plain file path puts the file at the root.
- No file found: `if-no-files-found` warn (default: a warning, success, no artifact), error (the step
  fails) or ignore.
- A name already uploaded in this run fails the step (HTTP 409) unless `overwrite: true`.

download
- `name`: that artifact, extracted into `path` (default: the workspace); missing, the step fails.
- otherwise every artifact of the run, or those whose name matches `pattern` (a glob): each into
  `path/<name>/`, or all into `path` itself with `merge-multiple: true`. None matching is not an error.
- Extraction adds and overwrites files; it never deletes what the directory held.

Which artifacts a job can see: GitHub runs jobs that do not `need` each other at the same time, so an
artifact is guaranteed to exist only when the job that uploaded it is one the downloading job needs,
directly or through others (or is the job itself). The rehearsal shows a job exactly those: anything
else would be a race on GitHub, and is treated as absent.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_INVALID_NAME = re.compile(r'["\:<>|*?\r\n\\/]')
_WILDCARD = re.compile(r"[*?\[]")


class ArtifactStepError(Exception):
    """What makes an artifact step fail, in the words of the action's own error."""


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """One uploaded artifact: its files (relative POSIX paths) stored under `directory`, and who made it."""

    name: str
    job: str  # the id of the job that uploaded it
    directory: Path
    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class _Pattern:
    negate: bool
    segments: tuple[str, ...]  # absolute path split on '/', the first being '' (root)
    directories_only: bool  # written with a trailing '/'

    @property
    def search_path(self) -> str:
        literal: list[str] = []
        for segment in self.segments:
            if _WILDCARD.search(segment):
                break
            literal.append(segment)
        return "/".join(literal) or "/"

    def matches(self, path: str, *, is_dir: bool) -> bool:
        parts = tuple(path.split("/"))
        if _match_segments(self.segments, parts) and (is_dir or not self.directories_only):
            return True
        # Implicit descendants: a pattern that does not end in '**' also matches everything below what it matches.
        if self.segments[-1] != "**":
            return _match_segments((*self.segments, "**"), parts) and not is_dir
        return False


def _match_segments(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        return any(_match_segments(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _match_segments(pattern[1:], parts[1:])


def _patterns(text: str, workspace: Path) -> list[_Pattern]:
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = line[1:].strip() if negate else line
        if line.startswith("~"):
            line = str(Path.home()) + line[1:]
        directories_only = line.endswith("/")
        absolute = os.path.normpath(line if Path(line).is_absolute() else workspace / line)
        patterns.append(_Pattern(negate=negate, segments=tuple(absolute.split("/")), directories_only=directories_only))
    return patterns


def _search_paths(patterns: Sequence[_Pattern]) -> list[str]:
    """The search path of each pattern that is not an exclusion, leaving out those below another one."""
    candidates = [p.search_path for p in patterns if not p.negate]
    result: list[str] = []
    for path in candidates:
        if path in result:
            continue
        if any(other != path and (path + "/").startswith(other.rstrip("/") + "/") for other in candidates):
            continue
        result.append(path)
    return result


def _least_common_ancestor(paths: Sequence[str]) -> str:
    split = [os.path.normpath(p).split("/") for p in paths]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    return "/".join(common) or "/"


def find_files(path_input: str, *, workspace: Path, include_hidden: bool) -> tuple[list[Path], Path]:
    """The files `path:` names and the artifact's root directory (upload-artifact's `findFilesToUpload`)."""
    patterns = _patterns(path_input, workspace)
    searches = _search_paths(patterns)

    def matched(path: str, *, is_dir: bool) -> bool:
        result = False
        for pattern in patterns:  # in order: a later exclusion removes, a later pattern adds back
            if pattern.matches(path, is_dir=is_dir):
                result = not pattern.negate
        return result

    files: list[Path] = []
    for search in searches:
        for item in _walk(Path(search), include_hidden=include_hidden):
            if matched(str(item), is_dir=False) and item not in files:
                files.append(item)
    if len(searches) > 1:
        root = _least_common_ancestor(searches)
    elif len(files) == 1 and str(files[0]) == searches[0]:
        root = str(files[0].parent)
    else:
        root = searches[0] if searches else str(workspace)
    return files, Path(root)


def _walk(start: Path, *, include_hidden: bool) -> Iterator[Path]:
    """Every file at or below `start`, following links, skipping hidden names (incl. `start`'s own) unless asked."""
    if not (start.exists() or start.is_symlink()):
        return
    stack = [start]
    seen: set[tuple[int, int]] = set()
    while stack:
        item = stack.pop()
        if not include_hidden and item.name.startswith("."):
            continue
        try:
            stat = item.stat()  # follows links; a broken one is left out
        except OSError:
            continue
        if item.is_dir():
            key = (stat.st_dev, stat.st_ino)
            if key in seen:  # a link cycle
                continue
            seen.add(key)
            stack.extend(sorted(item.iterdir(), reverse=True))
        else:
            yield item


@dataclass(kw_only=True)
class ArtifactStore:
    """The artifacts uploaded so far in one run, kept as plain directories under `root`."""

    root: Path
    artifacts: dict[str, Artifact] = field(default_factory=dict)

    def upload(self, inputs: Mapping[str, str], *, workspace: Path, job: str) -> list[str]:
        """Run `upload-artifact` with `inputs` (its `with:`) in `workspace`; returns its log lines."""
        name = inputs.get("name") or "artifact"
        path_input = inputs.get("path", "")
        if not path_input.strip():
            raise ArtifactStepError("Input required and not supplied: path")
        if _INVALID_NAME.search(name):
            raise ArtifactStepError(f"The artifact name is not valid: {name}. Contains the following character: "
                                    f"{_INVALID_NAME.search(name).group()!r}")  # type: ignore[union-attr]
        on_empty = inputs.get("if-no-files-found") or "warn"
        if on_empty not in ("warn", "error", "ignore"):
            raise ArtifactStepError(f"Unrecognized if-no-files-found input. Provided: {on_empty}. "
                                    "Available options: warn, error, ignore")
        include_hidden = _boolean(inputs, "include-hidden-files")
        files, root = find_files(path_input, workspace=workspace, include_hidden=include_hidden)
        log = []
        if not files:
            message = (f"No files were found with the provided path: {path_input.strip()}. "
                       "No artifacts will be uploaded.")
            if on_empty == "error":
                raise ArtifactStepError(message)
            return [f"{'Warning: ' if on_empty == 'warn' else ''}{message}"]
        if name in self.artifacts and not _boolean(inputs, "overwrite"):
            raise ArtifactStepError(
                "Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: "
                f"an artifact with this name already exists on the workflow run ({name!r})")
        directory = self.root / name
        if directory.exists():
            shutil.rmtree(directory)
        relative = []
        for file in files:
            inside = file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name
            target = directory / inside
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)  # the content, not a link: an artifact is a zip of files
            relative.append(inside)
        self.artifacts[name] = Artifact(name=name, job=job, directory=directory, files=tuple(relative))
        log.append(f"With the provided path, there will be {len(files)} file{'s' if len(files) != 1 else ''} "
                   f"uploaded (root {root})")
        hidden_left = [] if include_hidden else _hidden_below(path_input, workspace)
        if hidden_left:
            # Not in the action's output; said here because this is the mistake it makes easy.
            log.append(f"left out as hidden (include-hidden-files is false): {', '.join(hidden_left[:5])}"
                       + (f" and {len(hidden_left) - 5} more" if len(hidden_left) > 5 else ""))
        log.append(f"Artifact {name} has been successfully uploaded!")
        return log

    def download(self, inputs: Mapping[str, str], *, workspace: Path, visible_jobs: set[str]) -> list[str]:
        """Run `download-artifact` with `inputs`, seeing only the artifacts of `visible_jobs`."""
        name = inputs.get("name", "")
        target = Path(inputs.get("path") or workspace)
        if str(target).startswith("~"):
            target = Path(str(Path.home()) + str(target)[1:])
        target = target if target.is_absolute() else workspace / target
        visible = {n: a for n, a in self.artifacts.items() if a.job in visible_jobs}
        if name:
            artifact = visible.get(name)
            if artifact is None:
                raise ArtifactStepError(f"Artifact '{name}' not found")
            chosen, merge = [artifact], True
        else:
            pattern = inputs.get("pattern", "")
            chosen = [a for n, a in sorted(visible.items()) if not pattern or _minimatch(pattern, n)]
            merge = _boolean(inputs, "merge-multiple")
        for artifact in chosen:
            destination = target if merge else target / artifact.name
            for relative in artifact.files:
                path = destination / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(artifact.directory / relative, path)
        return [*(f"- {a.name} ({len(a.files)} file(s)) -> {target if merge else target / a.name}" for a in chosen),
                f"Total of {len(chosen)} artifact(s) downloaded"]


def _boolean(inputs: Mapping[str, str], key: str) -> bool:
    # core.getBooleanInput: the YAML 1.2 core schema's booleans; anything else is an error.
    value = inputs.get(key, "")
    if value in ("", "false", "False", "FALSE"):
        return False
    if value in ("true", "True", "TRUE"):
        return True
    raise ArtifactStepError(f"Input does not meet YAML 1.2 \"Core Schema\" specification: {key}\n"
                            "Support boolean input list: `true | True | TRUE | false | False | FALSE`")


def _minimatch(pattern: str, name: str) -> bool:
    # minimatch's defaults: a wildcard does not match a leading '.'.
    if name.startswith(".") and not pattern.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, pattern)


def _hidden_below(path_input: str, workspace: Path) -> list[str]:
    """Hidden files under the upload's search paths (to name what `include-hidden-files: false` drops)."""
    found = []
    for search in _search_paths(_patterns(path_input, workspace)):
        start = Path(search)
        if start.is_dir():
            for item in sorted(start.rglob(".*")):
                found.append(os.path.relpath(item, workspace) + ("/" if item.is_dir() else ""))
    return found
