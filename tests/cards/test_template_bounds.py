"""A family's card template that loops or allocates without bound ends in a CardError (exit 3), not a hang or a
MemoryError: each case is a real family override rendered through `render_family`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from jinja2 import Environment

from hfrelease.cards import CardError, CardInputs, render_family, template_bounds
from hfrelease.cards.environment import card_environment
from hfrelease.errors import ExitCode


def _override(tmp_path: Path, body: str) -> Path:
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "limitations.md.j2").write_text(body)
    return tmp_path


def _refused(demo_inputs: CardInputs, templates: Path) -> CardError:
    started = time.monotonic()
    with pytest.raises(CardError) as raised:
        render_family(demo_inputs, plots=False, environment=card_environment(templates))
    assert time.monotonic() - started < 30
    assert raised.value.exit_code == ExitCode.CONFIG
    return raised.value


def test_nested_loops_that_print_nothing_are_stopped_in_time(
    demo_inputs: CardInputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(template_bounds, "MAX_RENDER_SECONDS", 1.0)
    body = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n"
    error = _refused(demo_inputs, _override(tmp_path, body))
    assert "did not finish within 1 s" in str(error)


@pytest.mark.parametrize("expression", ['"x" * 10**11', '10**11 * "x"', "[0] * 10**9", "9 ** 1000000000"])
def test_a_product_without_bound_is_refused_before_it_is_built(
    demo_inputs: CardInputs, tmp_path: Path, expression: str
) -> None:
    error = _refused(demo_inputs, _override(tmp_path, "{{ (" + expression + ") | length }}\n"))
    assert "more than 1,000,000" in str(error)


def test_output_without_bound_is_stopped(demo_inputs: CardInputs, tmp_path: Path) -> None:
    body = '{% for i in range(100000) %}{{ "y" * 100 }}{% endfor %}\n'
    error = _refused(demo_inputs, _override(tmp_path, body))
    assert "wrote more than 4,000,000 characters" in str(error)


def test_a_finished_render_leaves_no_pending_interrupt() -> None:
    """The timer is disarmed with the render, whichever finished first: code running after it is never
    interrupted (a timer of 1 ms fires before, during or just after the render)."""
    template = Environment(autoescape=True).from_string("{{ x }}")
    outcomes = set()
    for _ in range(200):
        try:
            outcomes.add(template_bounds.render_bounded(template, {"x": 1}, seconds=0.001))
        except CardError:
            outcomes.add("timed out")
    assert outcomes <= {"1", "timed out"}
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        pass  # a leaked RenderTimeout would be raised here
