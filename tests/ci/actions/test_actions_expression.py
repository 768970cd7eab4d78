"""GitHub Actions expressions as the runner evaluates them (operators, coercions, functions, `if:` defaults)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hfrelease.ci.actions.expression import ExpressionError, condition, evaluate, interpolate, plain

CONTEXTS: dict[str, Any] = {
    "github": {"ref_name": "v0.1", "event_name": "push"},
    "env": {"PUBLISHED": "true", "EMPTY": ""},
    "matrix": {"artifact": "fp8", "n": 2.0},
    "needs": {"check": {"result": "success", "outputs": {"matrix": '{"include":[{"artifact":"a","publish":true}]}'}}},
    "steps": {"check": {"outputs": {"matrix": "[1,2]"}, "outcome": "success"}},
    "secrets": {},
}


def _status(success: bool = True, failure: bool = False) -> dict[str, Any]:
    return {"success": lambda: success, "failure": lambda: failure, "cancelled": lambda: False, "always": lambda: True}


@pytest.mark.parametrize(("expression", "expected"), [
    ("github.ref_name", "v0.1"),
    ("GITHUB.REF_NAME", "v0.1"),  # context and property names ignore case
    ("matrix['artifact']", "fp8"),
    ("needs.check.result == 'SUCCESS'", True),  # strings compare ignoring case
    ("env.PUBLISHED != 'true'", False),
    ("matrix.n == '2'", True),  # mismatched types compare as numbers
    ("null == 0", True),
    ("true == 1", True),
    ("'' == 0", True),
    ("'abc' == 0", False),  # NaN equals nothing
    ("env.MISSING", None),  # a missing property is null
    ("env.EMPTY || 'default'", "default"),  # || returns an operand
    ("env.PUBLISHED && matrix.artifact", "fp8"),
    ("!env.EMPTY", True),
    ("1 < 2 && 'b' > 'A'", True),
    ("(1 == 1) && !(2 < 1)", True),
    ("0x10 == 16", True),
    ("1.5e1", 15.0),
    ("'it''s'", "it's"),
    ("contains('Hello', 'ELL')", True),
    ("contains(fromJSON('[\"a\",\"b\"]'), 'B')", True),
    ("startsWith(github.ref_name, 'v')", True),
    ("endsWith('file.yaml', '.YAML')", True),
    ("format('{0}-{1} {{x}}', 'a', 1)", "a-1 {x}"),
    ("join(fromJSON('[1,2,3]'), '+')", "1+2+3"),
    ("fromJSON(needs.check.outputs.matrix).include[0].artifact", "a"),
    ("fromJSON(needs.check.outputs.matrix).include.*.artifact", ["a"]),
    ("fromJSON(steps.check.outputs.matrix)[1]", 2.0),
    ("fromJSON('true')", True),
])
def test_expressions_evaluate_as_on_github(expression: str, expected: Any) -> None:
    """Operators, loose equality, null for missing properties, indexing, the object filter, the functions."""
    assert evaluate(expression, CONTEXTS) == expected


def test_to_json_writes_integral_numbers_as_integers() -> None:
    """toJSON(fromJSON(x)) round-trips a matrix: 1 stays 1, not 1.0."""
    text = evaluate("toJSON(fromJSON('{\"a\": [1, 2.5, true, null]}'))", CONTEXTS)
    assert text == '{\n  "a": [\n    1,\n    2.5,\n    true,\n    null\n  ]\n}'
    assert plain({"n": 2.0}) == {"n": 2}


def test_interpolation_keeps_a_whole_value_and_formats_text() -> None:
    """`${{ x }}` alone keeps its type (a matrix object); inside text it becomes a string (null as '')."""
    assert interpolate("${{ fromJSON('{\"include\":[]}') }}", CONTEXTS) == {"include": []}
    text = interpolate("eval ${{ matrix.artifact }} (${{ matrix.n }}, ${{ env.MISSING }})", CONTEXTS)
    assert text == "eval fp8 (2, )"


def test_short_circuit_does_not_evaluate_the_other_side() -> None:
    """`false && fromJSON('')` is false, as on GitHub: the right side's function is never called."""
    assert evaluate("false && fromJSON('')", CONTEXTS) is False
    assert evaluate("'x' || fromJSON('')", CONTEXTS) == "x"
    with pytest.raises(ExpressionError, match="fromjson"):
        evaluate("true && fromJSON('')", CONTEXTS)


@pytest.mark.parametrize("bad", ["github.", "1 ==", "nosuch.thing", "unknownfn()", "'open", "a = b", "success()"])
def test_invalid_expressions_are_errors(bad: str) -> None:
    """A syntax error, an unknown context or function, or a status function outside `if:` fails as GitHub does."""
    with pytest.raises(ExpressionError):
        evaluate(bad, CONTEXTS)


def test_if_implies_success_unless_a_status_function_is_named() -> None:
    """`if: x` means `success() && x`; `!cancelled()` and `always()` run after a failure; `${{ }}` is optional."""
    failed = _status(success=False, failure=True)
    assert condition(None, CONTEXTS, _status()) is True
    assert condition(None, CONTEXTS, failed) is False
    assert condition("env.PUBLISHED == 'true'", CONTEXTS, failed) is False
    assert condition("${{ env.PUBLISHED == 'true' }}", CONTEXTS, _status()) is True
    assert condition("${{ !cancelled() }}", CONTEXTS, failed) is True
    assert condition("always()", CONTEXTS, failed) is True
    assert condition("failure()", CONTEXTS, failed) is True
    assert condition("failure()", CONTEXTS, _status()) is False


def test_nan_and_number_formatting() -> None:
    """A string that is not a number compares as NaN: never equal, never less or greater."""
    assert evaluate("'x' < 1", CONTEXTS) is False and evaluate("'x' >= 1", CONTEXTS) is False
    assert math.isclose(evaluate("0.5", CONTEXTS), 0.5)
    assert interpolate("${{ 3 }}-${{ 0.25 }}", CONTEXTS) == "3-0.25"
