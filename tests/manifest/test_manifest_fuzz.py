"""Property-based tests: random and mutated manifests never crash validation, always exit 0 or 3."""

from __future__ import annotations

import contextlib
import copy
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hfrelease.cli import main
from hfrelease.errors import ConfigError, ExitCode
from hfrelease.manifest import Manifest
from hfrelease.manifest.loading import parse_manifest, validate_manifest

pytestmark = pytest.mark.unit

FAMILY = Path(__file__).resolve().parent.parent / "fixtures" / "family"
VALID = tomllib.loads((FAMILY / "release.toml").read_text())

_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["ref", "fp8", "draft", "none", "ngram", "reference", "quant", "thinking", "../x", "a/b"]),
    st.dates(),
    st.datetimes(),
)
_keys = st.one_of(
    st.text(min_size=1, max_size=12),
    st.sampled_from(["id", "kind", "repo", "source", "path", "hub", "draft", "target", "env", "args", "gate"]),
)
# Values a TOML document can hold: scalars, arrays and tables, nested.
toml_values = st.recursive(
    _scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=4)),
    max_leaves=20,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_paths(value, (*prefix, index)))
    return found


ALL_PATHS = _paths(VALID)[1:]


@st.composite
def mutated_manifests(draw: st.DrawFn) -> dict[str, Any]:
    """The valid fixture with 1-4 random edits: deletions, replaced values, inserted keys."""
    data = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(ALL_PATHS))
        parent: Any = data
        try:
            for part in path[:-1]:
                parent = parent[part]
            last = path[-1]
            action = draw(st.sampled_from(["delete", "replace", "insert"]))
            if action == "delete":
                del parent[last]
            elif action == "replace":
                parent[last] = draw(toml_values)
            elif isinstance(parent, dict):
                parent[draw(_keys)] = draw(toml_values)
            elif isinstance(parent, list):
                parent.append(draw(toml_values))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or retyped this path
    return data


def _validate(data: dict[str, Any]) -> Manifest | None:
    try:
        return validate_manifest(data, root=FAMILY, source="fuzz.toml")
    except ConfigError as exc:
        assert exc.problems, "a ConfigError must name at least one problem"
        for problem in exc.problems:
            assert problem.render()
        return None


# FUZZ_EXAMPLES=3000 for a longer hunt; CI runs the default.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(mutated_manifests())
def test_mutated_manifests_never_crash(data: dict[str, Any]) -> None:
    """Any edit of a valid manifest validates or raises ConfigError with its problems, nothing else."""
    _validate(data)


@FUZZ
@given(st.dictionaries(_keys, toml_values, max_size=6))
def test_random_tables_never_crash(data: dict[str, Any]) -> None:
    """Arbitrary TOML-shaped data is rejected with ConfigError, never a traceback."""
    _validate(data)


@FUZZ
@given(st.text(max_size=300))
def test_random_text_never_crashes(text: str) -> None:
    """Arbitrary text is either a manifest or a ConfigError."""
    with contextlib.suppress(ConfigError):
        parse_manifest(text, root=FAMILY)


def _toml_safe(data: Any) -> Any:
    """tomli-w cannot write NaN-free-only constraints away; keep what TOML can hold."""
    if isinstance(data, dict):
        return {str(k): _toml_safe(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_toml_safe(v) for v in data]
    return data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(mutated_manifests())
def test_cli_exit_code_is_documented(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], data: dict[str, Any]
) -> None:
    """Through the command line, a mutated manifest exits 0 or 3 and never prints a traceback."""
    directory = tmp_path_factory.mktemp("fuzz")
    path = directory / "release.toml"
    try:
        path.write_text(tomli_w.dumps(_toml_safe(data)))
    except (TypeError, ValueError):
        return  # tomli-w refuses some values (e.g. mixed-type edge cases); tomllib-level fuzz covers them
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(path)])
    captured = capsys.readouterr()
    assert exit_info.value.code in (ExitCode.OK, ExitCode.CONFIG)
    assert "Traceback" not in captured.err + captured.out
    assert "internal error" not in captured.err


def test_fuzz_baseline_is_valid() -> None:
    """The manifest the fuzzer mutates is itself valid (otherwise the fuzz would prove little)."""
    assert _validate(copy.deepcopy(VALID)) is not None
