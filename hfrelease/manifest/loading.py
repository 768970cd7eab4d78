"""Read `release.toml` once into a `Manifest`, or raise one `ConfigError` naming every problem.

The schema (pydantic, see `model.py`) and the cross-reference checks (`references.py`) both run on
every load, so a manifest with five mistakes is reported with five lines, each with its place in the
file (`artifact[2].serve.env`) and, for a misspelt key, the key that was probably meant.
"""

from __future__ import annotations

import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from hfrelease.errors import ConfigError, ConfigProblem
from hfrelease.manifest.gate_rules import check_gate_concurrency, check_gate_kinds, check_gate_seeds, check_prompt_sets
from hfrelease.manifest.input_files import InputFileError, read_bounded
from hfrelease.manifest.model import Manifest
from hfrelease.manifest.references import check_paths, check_references, check_repo_ids, suggest

MANIFEST_NAME = "release.toml"
# A real manifest is a few kilobytes; a megabyte is already absurd and still quick to refuse.
MAX_MANIFEST_BYTES = 1 << 20
# The schema nests about five levels (artifact -> serve -> env); later stages walk the data recursively.
MAX_DEPTH = 32

_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "literal_error": None,
}


def find_manifest(path: Path) -> Path:
    """`path` itself when it is a file, else `path/release.toml`."""
    return path / MANIFEST_NAME if path.is_dir() else path


def load_manifest(path: Path, *, check_files: bool = True) -> Manifest:
    """Parse and validate the manifest at `path` (a release.toml or the directory holding it)."""
    manifest_path = find_manifest(path)
    raw = read_manifest_bytes(manifest_path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(manifest_path),
            [ConfigProblem(location="", message=f"not UTF-8 text (byte {exc.start}): TOML files are UTF-8")],
        ) from None
    return parse_manifest(text, root=manifest_path.parent, source=str(manifest_path), check_files=check_files)


def read_manifest_bytes(path: Path, *, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else ConfigError at once.

    A `release.toml` linked to /dev/zero was read until memory ran out, and a FIFO blocked forever: it is read
    as every file the manifest names is (`input_files.read_bounded`).
    """
    try:
        return read_bounded(path, limit=limit, what="a manifest", expected="a release.toml file",
                            name="the manifest")
    except FileNotFoundError as exc:
        message = f"cannot read the manifest: {exc.strerror}"
    except InputFileError as exc:
        message = str(exc)
    raise ConfigError(str(path), [ConfigProblem(location="", message=message)])


def parse_manifest(text: str, *, root: Path, source: str = MANIFEST_NAME, check_files: bool = True) -> Manifest:
    """Validate manifest text; relative paths in it are relative to `root`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already says "(at line N, column M)".
        raise ConfigError(source, [ConfigProblem(location="", message=f"not valid TOML: {exc}")]) from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively: 100k '[' exhaust the stack.
        raise ConfigError(source, [_too_deep()]) from None
    if _depth(data) > MAX_DEPTH:
        raise ConfigError(source, [_too_deep()])
    return validate_manifest(data, root=root, source=source, check_files=check_files)


def _too_deep() -> ConfigProblem:
    return ConfigProblem(location="", message=f"arrays or tables nested more than {MAX_DEPTH} deep: a manifest "
                                              "needs a handful of levels")


def _depth(data: Any) -> int:
    """How deeply `data` nests lists and dicts, found without recursion (so any depth is safe)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def validate_manifest(
    data: Mapping[str, Any], *, root: Path, source: str = MANIFEST_NAME, check_files: bool = True
) -> Manifest:
    """Validate already-parsed manifest data, reporting schema and cross-reference problems together."""
    problems: list[ConfigProblem] = []
    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        problems.extend(_translate(error) for error in exc.errors(include_url=False))
    problems.extend(check_references(data))
    problems.extend(check_repo_ids(data))
    problems.extend(check_gate_kinds(data))
    problems.extend(check_gate_seeds(data))
    problems.extend(check_gate_concurrency(data))
    if check_files:
        problems.extend(check_paths(data, root))
        problems.extend(check_prompt_sets(data, root))
    if problems or manifest is None:
        raise ConfigError(source, _dedupe(problems))
    manifest._root = root.resolve()
    return manifest


def format_location(loc: tuple[int | str, ...]) -> str:
    """('artifact', 2, 'serve', 'env') -> 'artifact[2].serve.env' (a table's key: 'serve.env.NAME')."""
    text = ""
    for part in loc:
        if part == "[key]":  # pydantic's mark of a key (not its value) at fault: the key's place says it
            continue
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _translate(error: Any) -> ConfigProblem:
    loc = tuple(error["loc"])
    kind = error["type"]
    location = format_location(loc)
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        key = str(loc[-1])
        listing = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        nearest = suggest(key, allowed)
        return ConfigProblem(
            location=location,
            message="unknown key" if nearest else f"unknown key{listing}",
            suggestion=nearest,
        )
    if kind == "missing":
        return ConfigProblem(location=location, message="required key is missing")
    if kind in _TYPE_NAMES and _TYPE_NAMES[kind] is not None:
        value = error.get("input")
        got = _toml_type(type(value).__name__) + _echo(value)
        return ConfigProblem(location=location, message=f"expected {_TYPE_NAMES[kind]}, got {got}")
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return ConfigProblem(location=location, message=message)


def _echo(value: object) -> str:
    """A short rendering of a wrong value, to help find it; long strings are not echoed because a
    misplaced credential must never be printed."""
    if isinstance(value, bool | int | float):
        return f" ({value!r})"
    if isinstance(value, str) and len(value) <= 24 and not value.lower().startswith(("hf_", "ghp_", "sk-")):
        return f" ({value!r})"
    return ""


def _toml_type(python_type: str) -> str:
    return {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "a boolean",
        "list": "an array",
        "dict": "a table",
        "datetime": "a date-time",
        "date": "a date",
        "time": "a time",
    }.get(python_type, python_type)


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at `loc` accepts, found by walking the Manifest's field types."""
    annotation: Any = Manifest
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(part, int):
            args = typing.get_args(annotation)
            if typing.get_origin(annotation) is not list or not args:
                return []
            annotation = args[0]
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part)
            if field is None:
                return []
            annotation = field.annotation
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return sorted(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip Optional[...] and Annotated[...] down to the type that decides the table's keys."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation


def _dedupe(problems: list[ConfigProblem]) -> list[ConfigProblem]:
    seen: set[tuple[str, str]] = set()
    unique: list[ConfigProblem] = []
    for problem in problems:
        key = (problem.location, problem.message)
        if key not in seen:
            seen.add(key)
            unique.append(problem)
    return unique
