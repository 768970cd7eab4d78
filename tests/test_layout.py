"""The package's import graph: no cycle between modules nor between packages, only `hfrelease.cli` imports Click
and Rich, and `cli/` stays thin."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # the budget of cli/ guards every landing on main

PACKAGE = Path(__file__).resolve().parents[1] / "hfrelease"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    return modules


def _imports(path: Path) -> set[str]:
    """Every name `path` imports anywhere: at the top, inside functions, under TYPE_CHECKING (`from M import
    N` as M.N: the module N when it is one, else a name of M)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {module: {m for n in _imports(path) if (m := owner(n)) is not None and m != module}
            for module, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (empty when there is none), found by depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = 2
        path.pop()
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_no_import_cycle() -> None:
    """No module imports itself through others, not even for type annotations or inside a function."""
    assert _cycle(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The search reports a cycle it is given (so the test above cannot pass by never looking)."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def _package(module: str) -> str | None:
    """The package (or top-level module) of hfrelease that `module` belongs to: `hfrelease.ci.actions.run` is
    `ci`; the root package itself (`hfrelease`, its `__version__`) is none."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """`graph` at package granularity: package A imports package B when any module of A imports one of B."""
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if (source := _package(module)) is None:
            continue
        packages.setdefault(source, set()).update(
            t for target in targets if (t := _package(target)) is not None and t != source)
    return packages


def test_packages_import_only_downwards() -> None:
    """No two packages import each other, through others either (not even for type annotations or inside a
    function): the packages have an order, each importing only those below it (ARCHITECTURE.md draws it)."""
    assert _cycle(_package_graph(_graph())) == []


def test_the_package_graph_folds_modules_into_packages() -> None:
    """Modules of two packages importing each other's are a package cycle, though no module imports itself
    (so the test above cannot pass by looking at modules)."""
    modules = {"hfrelease.a.x": {"hfrelease.b.y"}, "hfrelease.b.z": {"hfrelease.a.w"}, "hfrelease.a.w": set(),
               "hfrelease.b.y": set(), "hfrelease": set()}
    assert _cycle(modules) == []
    assert _cycle(_package_graph(modules)) == ["a", "b", "a"]


def test_only_the_cli_imports_click_and_rich() -> None:
    """Stages and core modules return values; only `hfrelease.cli` draws on the terminal."""
    offenders = sorted(
        module for module, path in _modules().items()
        if not module.startswith("hfrelease.cli")
        and any(n.split(".")[0] in ("click", "rich") for n in _imports(path))
    )
    assert offenders == []


# What draws on the terminal through Rich (a console's print, log, status or rule; a console or live display of
# its own; Rich's own print): only `hfrelease/cli/output.py`, which never hands user text to Rich's markup.
_RICH_PRINTING = {"print", "log", "print_json", "status", "rule", "print_exception"}
_RICH_DRAWERS = {"rich.print", "rich.print_json", "rich.console.Console", "rich.live.Live", "rich.status.Status"}


def _rich_printing(path: Path) -> list[str]:
    """Where `path` prints through Rich: `<line>: <what>` for each call on a console and each drawer it imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RICH_PRINTING \
                and "console" in ast.unparse(node.func.value).lower():
            found.append(f"{node.lineno}: {ast.unparse(node.func)}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rich"):
            found += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names
                      if f"{node.module}.{a.name}" in _RICH_DRAWERS]
    return found


def test_only_cli_output_prints_through_rich() -> None:
    """Everything a command prints goes through `hfrelease/cli/output.py` (`show`, `say`, `echo`, `done`,
    `working`, `live`): no other module prints through a Rich console, where a path holding `[main]` was eaten
    as markup (`compare --hub-root ".../hub [main]"` printed `root .../hub ;`)."""
    offenders = {module: found for module, path in _modules().items()
                 if module != "hfrelease.cli.output" and (found := _rich_printing(path))}
    assert offenders == {}


def test_the_rich_scan_finds_printing(tmp_path: Path) -> None:
    """The scan reports a console's print and a console of a module's own (so the test above cannot pass by
    never looking)."""
    planted = tmp_path / "planted.py"
    planted.write_text("from rich.console import Console\nfrom hfrelease.cli.output import err_console\n"
                       "err_console.print(f'[green]ok[/] {path}')\n")
    assert _rich_printing(planted) == ["1: rich.console.Console", "3: err_console.print"]


# The command line only parses options, calls a stage and draws its report; logic found in `cli/` belongs
# in `hfrelease/stages/` (a report's view for people included: `stages/view.py`). Lower this as cli/ shrinks.
CLI_BUDGET = 1_025


def test_the_cli_stays_within_its_line_budget() -> None:
    """`hfrelease/cli/` holds no more lines in total than its budget, so logic cannot creep back into it."""
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in (PACKAGE / "cli").glob("*.py"))
    assert lines <= CLI_BUDGET, f"hfrelease/cli/ has {lines} lines, over its budget of {CLI_BUDGET}: move logic " \
                                "into hfrelease/stages/"
