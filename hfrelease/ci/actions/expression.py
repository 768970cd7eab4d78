"""GitHub Actions expressions (`${{ ... }}`): parsed and evaluated as the Actions runner does.

Written here by hand because no maintained Python library evaluates them: GitHub's own evaluator is
TypeScript (`@actions/expressions`, npm), the offline runners are Go (`act`, which also needs Docker) or
Rust crates, and the PyPI packages named for Actions lint, pin or wrap `act`. The language is small and
documented: https://docs.github.com/actions/reference/workflows-and-actions/expressions

What is implemented, following that page: literals (null, booleans, numbers incl. hex and exponents,
single-quoted strings with `''`), property access (`a.b`, `a['b']`, the object filter `a.*.b`), `!`, `<`
`<=` `>` `>=` `==` `!=` (loose: mismatched types are compared as numbers, strings case-insensitively), `&&`
and `||` (returning an operand, not a boolean), grouping, and the functions contains, startsWith, endsWith,
format, join, toJSON, fromJSON, success, failure, cancelled and always. Context and function names are
case-insensitive. `hashFiles(patterns...)` hashes the files the patterns match under `github.workspace`
(`hash_files.py`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hfrelease.errors import ExitCode, HfreleaseError


class ExpressionError(HfreleaseError):
    """An expression that GitHub would refuse to parse or evaluate (the step or job fails with it)."""

    exit_code = ExitCode.CONFIG

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(f"${{{{ {expression} }}}}: {message}",
                         hint="Fix the expression in the workflow file (actionlint finds most of these).")


# The job or step status functions, answered by whoever evaluates an `if:`; absent elsewhere.
StatusFunctions = Mapping[str, Callable[[], bool]]

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>0x[0-9a-fA-F]+|-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\].,*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
""", re.VERBOSE)


@dataclass(frozen=True, kw_only=True)
class _Token:
    kind: str
    text: str


def _tokens(text: str) -> list[_Token]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ExpressionError(text, f"unexpected character {text[position]!r} at position {position}")
        position = match.end()
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(_Token(kind=kind, text=match.group()))
    return tokens


class _Filter(list[Any]):
    """The result of `a.*`: a list that a following property access maps over (GitHub's object filter)."""


class _Parser:
    """Recursive descent over the precedence levels: || < && < == != < comparisons < ! < access."""

    def __init__(self, text: str, contexts: Mapping[str, Any], status: StatusFunctions) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.position = 0
        self.contexts = {k.lower(): v for k, v in contexts.items()}
        self.status = {k.lower(): v for k, v in status.items()}
        self.skipping = 0

    def fail(self, message: str) -> ExpressionError:
        return ExpressionError(self.text, message)

    def peek(self) -> _Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, text: str | None = None) -> _Token:
        token = self.peek()
        if token is None or (text is not None and token.text != text):
            raise self.fail(f"expected {text or 'more'}, found {token.text if token else 'the end'}")
        self.position += 1
        return token

    def at(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "op" and token.text in texts

    def parse(self) -> Any:
        if not self.tokens:
            raise self.fail("an empty expression")
        value = self.or_()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.take().text!r}")
        return value

    # `&&` and `||` short-circuit as GitHub's do: the operand that does not decide is parsed with
    # `skipping` set, so its functions are not called and cannot fail (e.g. fromJSON of an empty output).
    def or_(self) -> Any:
        value = self.and_()
        while self.at("||"):
            self.take()
            decided = truthy(value)
            self.skipping += decided
            right = self.and_()
            self.skipping -= decided
            value = value if decided else right
        return value

    def and_(self) -> Any:
        value = self.equality()
        while self.at("&&"):
            self.take()
            decided = not truthy(value)
            self.skipping += decided
            right = self.equality()
            self.skipping -= decided
            value = value if decided else right
        return value

    def equality(self) -> Any:
        value = self.comparison()
        while self.at("==", "!="):
            op = self.take().text
            right = self.comparison()
            value = loose_equal(value, right) == (op == "==")
        return value

    def comparison(self) -> Any:
        value = self.unary()
        while self.at("<", "<=", ">", ">="):
            op = self.take().text
            value = _compare(value, self.unary(), op)
        return value

    def unary(self) -> Any:
        if self.at("!"):
            self.take()
            return not truthy(self.unary())
        return self.access()

    def access(self) -> Any:
        value = self.primary()
        while self.at(".", "["):
            if self.take().text == ".":
                token = self.take()
                if token.text == "*":
                    value = _Filter(_children(value))
                elif token.kind == "name":
                    value = _property(value, token.text)
                else:
                    raise self.fail(f"a property name after '.', not {token.text!r}")
            else:
                if self.at("*"):
                    self.take()
                    value = _Filter(_children(value))
                else:
                    value = _index(value, self.or_())
                self.take("]")
        return list(value) if isinstance(value, _Filter) else value

    def primary(self) -> Any:  # noqa: PLR0911 - one return per kind of token
        token = self.take()
        if token.text == "(":
            value = self.or_()
            self.take(")")
            return value
        if token.kind == "number":
            return float(int(token.text, 16)) if token.text.lower().startswith("0x") else float(token.text)
        if token.kind == "string":
            return token.text[1:-1].replace("''", "'")
        if token.kind != "name":
            raise self.fail(f"unexpected {token.text!r}")
        name = token.text.lower()
        if name in ("true", "false"):
            return name == "true"
        if name == "null":
            return None
        if self.at("("):
            return self.call(name)
        if name not in self.contexts:
            if self.skipping:
                return None
            raise self.fail(f"unrecognized named-value: {token.text!r} (available: {', '.join(sorted(self.contexts))})")
        return self.contexts[name]

    def call(self, name: str) -> Any:
        self.take("(")
        args: list[Any] = []
        while not self.at(")"):
            if args:
                self.take(",")
            args.append(self.or_())
        self.take(")")
        if self.skipping:
            return None
        if name in _STATUS:
            if args:
                raise self.fail(f"{name}() takes no arguments")
            if name not in self.status:
                raise self.fail(f"{name}() is only available in `if:`")
            return self.status[name]()
        if name == "hashfiles":
            from hfrelease.ci.actions.hash_files import hash_files

            workspace = _property(self.contexts.get("github"), "workspace")
            if not workspace:
                raise self.fail("hashFiles() needs a workspace (github.workspace)")
            try:
                return hash_files(str(workspace), [to_string(a) for a in args])
            except (OSError, ValueError) as error:
                raise self.fail(f"hashFiles(): {error}") from None
        function = _FUNCTIONS.get(name)
        if function is None:
            raise self.fail(f"unrecognized function {name!r}")
        try:
            return function(*args)
        except (TypeError, ValueError) as error:
            raise self.fail(f"{name}(): {error}") from None


_STATUS = ("success", "failure", "cancelled", "always")


def _children(value: Any) -> list[Any]:
    if isinstance(value, _Filter):
        return [c for v in value for c in _children(v)]
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _property(value: Any, name: str) -> Any:
    if isinstance(value, _Filter):
        return _Filter(p for v in value if (p := _property(v, name)) is not None)
    if isinstance(value, Mapping):
        lowered = name.lower()
        for key, item in value.items():
            if str(key).lower() == lowered:
                return item
    return None  # a missing property is null, never an error


def _index(value: Any, key: Any) -> Any:
    if isinstance(value, list) and not isinstance(key, str):
        number = to_number(key)
        if math.isnan(number) or number != int(number) or not 0 <= number < len(value):
            return None
        return value[int(number)]
    return _property(value, to_string(key))


def truthy(value: Any) -> bool:
    """GitHub's truthiness: false, 0, -0, '', null and NaN are falsy; arrays and objects are truthy."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)):
        return not (value == 0 or math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def to_number(value: Any) -> float:  # noqa: PLR0911 - one return per type
    """The number a value coerces to: null 0, booleans 1/0, strings parsed ('' is 0), anything else NaN."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def to_string(value: Any) -> str:  # noqa: PLR0911 - one return per type
    """How a value reads when interpolated into text: null is '', booleans 'true'/'false', 1.0 is '1'."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return str(int(value)) if value == int(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "Array"
    if isinstance(value, Mapping):
        return "Object"
    return str(value)


def loose_equal(left: Any, right: Any) -> bool:
    """`==`: same types compare directly (strings ignoring case); otherwise both are coerced to numbers."""
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    if isinstance(left, (list, dict)) or isinstance(right, (list, dict)):
        return left is right  # arrays and objects are equal only to themselves
    if type(left) is type(right):
        return bool(left == right)
    return to_number(left) == to_number(right)  # NaN equals nothing


def _compare(left: Any, right: Any, op: str) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        a: Any = left.lower()
        b: Any = right.lower()
    else:
        a, b = to_number(left), to_number(right)
        if math.isnan(a) or math.isnan(b):
            return False
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def _contains(search: Any, item: Any) -> bool:
    if isinstance(search, list):
        return any(loose_equal(element, item) for element in search)
    return to_string(item).lower() in to_string(search).lower()


def _format(template: Any, *args: Any) -> str:
    text = to_string(template)

    def replace(match: re.Match[str]) -> str:
        if match.group() == "{{":
            return "{"
        if match.group() == "}}":
            return "}"
        index = int(match.group(1))
        if index >= len(args):
            raise ValueError(f"the format string names argument {index}, but only {len(args)} given")
        return to_string(args[index])

    return re.sub(r"\{\{|\}\}|\{(\d+)\}", replace, text)


def _join(items: Any, separator: Any = ",") -> str:
    if isinstance(items, list):
        return to_string(separator).join(to_string(i) for i in items)
    return to_string(items)


def _to_json(value: Any) -> str:
    return json.dumps(_plain(value), indent=2)


def _plain(value: Any) -> Any:
    # Numbers are floats inside expressions; integral ones are written as integers, as GitHub writes them.
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _from_json(text: Any) -> Any:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"not JSON: {to_string(text)!r}")
    return _numbers_as_floats(json.loads(text))


def _numbers_as_floats(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _numbers_as_floats(v) for k, v in value.items()}
    return value


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "contains": _contains,
    "startswith": lambda s, p: to_string(s).lower().startswith(to_string(p).lower()),
    "endswith": lambda s, p: to_string(s).lower().endswith(to_string(p).lower()),
    "format": _format,
    "join": _join,
    "tojson": _to_json,
    "fromjson": _from_json,
}


def evaluate(expression: str, contexts: Mapping[str, Any], status: StatusFunctions | None = None) -> Any:
    """The value of one expression (the text between `${{` and `}}`) under `contexts` (e.g. env, matrix)."""
    return _Parser(expression, contexts, status or {}).parse()


def plain(value: Any) -> Any:
    """A value as it leaves an expression for YAML/JSON: integral numbers as int."""
    return _plain(value)


_TEMPLATE = re.compile(r"\$\{\{((?:(?!\}\}).)*)\}\}", re.DOTALL)


def interpolate(text: str, contexts: Mapping[str, Any], status: StatusFunctions | None = None) -> Any:
    """A workflow value with `${{ }}` in it: the bare value when it is exactly one expression, else text."""
    whole = _TEMPLATE.fullmatch(text.strip())
    if whole is not None:
        return evaluate(whole.group(1).strip(), contexts, status)
    return _TEMPLATE.sub(lambda m: to_string(evaluate(m.group(1).strip(), contexts, status)), text)


def uses_status_function(condition: str) -> bool:
    """Whether an `if:` names success(), failure(), cancelled() or always() (else `success() &&` is implied)."""
    return re.search(r"\b(success|failure|cancelled|always)\s*\(", condition, re.IGNORECASE) is not None


def condition(text: object, contexts: Mapping[str, Any], status: StatusFunctions) -> bool:
    """An `if:` value: `${{ }}` optional; without a status function it means `success() && (...)`."""
    if text is None:
        return status["success"]()
    if isinstance(text, bool):
        return text and status["success"]()
    source = str(text).strip()
    whole = _TEMPLATE.fullmatch(source)
    if whole is not None:
        source = whole.group(1).strip()
    elif "${{" in source:
        # Text around an expression: a string, truthy unless empty (GitHub warns about this form).
        return truthy(interpolate(source, contexts, status)) and status["success"]()
    if not uses_status_function(source):
        return status["success"]() and truthy(evaluate(source, contexts, status))
    return truthy(evaluate(source, contexts, status))
