"""A custom gate's `num_concurrent`: the requests it sends at once (default 1), checked against `[eval] in_flight`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from hfrelease.manifest import load_manifest
from tests.conftest import CliRun

pytestmark = pytest.mark.unit


def _edit(family: Path, *, gate: dict[str, Any] | None = None, eval_table: dict[str, Any] | None = None) -> Path:
    """The fixture family with its custom gate (`json`, gate[1]) and `[eval]` table changed."""
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    assert data["gate"][1]["id"] == "json" and "command" in data["gate"][1]
    data["gate"][1].update(gate or {})
    if eval_table is not None:
        data["eval"] = eval_table
    path.write_text(tomli_w.dumps(data))
    return path


def test_custom_gate_sends_one_request_unless_it_says_more(fixture_family: Path) -> None:
    """Unset, a custom gate's num_concurrent is 1 (an lm-eval gate's stays 8); a declared value is kept."""
    gates = {g.id: g for g in load_manifest(fixture_family).gate}
    assert (gates["json"].num_concurrent, gates["arith"].num_concurrent) == (1, 8)
    _edit(fixture_family, gate={"num_concurrent": 4})
    assert next(g for g in load_manifest(fixture_family).gate if g.id == "json").num_concurrent == 4


@pytest.mark.parametrize(("gate", "eval_table", "fragment"), [
    ({"num_concurrent": 24}, {"in_flight": 16}, "sends 24 requests at once, more than [eval] in_flight = 16"),
    ({"num_concurrent": 0}, None, "greater than or equal to 1"),
    ({"num_concurrent": "4"}, None, "expected an integer"),
], ids=["above-the-budget", "zero", "string"])
def test_check_names_a_bad_custom_gate_concurrency(fixture_family: Path, cli: CliRun, gate: dict[str, Any],
                                                   eval_table: dict[str, Any] | None, fragment: str) -> None:
    """`check` exits 3 naming gate[1].num_concurrent: not a positive integer, or more than the whole budget."""
    path = _edit(fixture_family, gate=gate, eval_table=eval_table)
    code, _, err = cli(["check", str(path)])
    assert code == ExitCode.CONFIG
    assert "  - gate[1].num_concurrent" in err and fragment in err
    code, out, _ = cli(["check", "--json", str(path)])
    assert code == ExitCode.CONFIG
    assert [p["location"] for p in json.loads(out)["problems"]] == ["gate[1].num_concurrent"]


@pytest.mark.parametrize("eval_table", [{"in_flight": 16, "schedule": "sequential"}, {"in_flight": 24}, None],
                         ids=["sequential", "within", "no-in-flight"])
def test_custom_gate_concurrency_within_the_budget_passes(fixture_family: Path, eval_table: dict[str, Any] | None,
                                                          ) -> None:
    """Within in_flight, under the sequential schedule (no shared budget), or with the budget only known at run
    time (no in_flight: a sweep's knee or the gates' largest num_concurrent), 24 requests at once load."""
    _edit(fixture_family, gate={"num_concurrent": 24}, eval_table=eval_table)
    assert next(g for g in load_manifest(fixture_family).gate if g.id == "json").num_concurrent == 24
