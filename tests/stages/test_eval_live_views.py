"""The eval stage's live views: what each part's display shows, its CI fold's title and where its logs are."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hfrelease.stages.eval_view import LiveProgress, LiveViews

pytestmark = pytest.mark.unit


def _plan(**servers: list[tuple[str, bool]]) -> Any:
    """A plan's shape as the views read it: per server its artifact (or label) and its items, pending or not."""
    return SimpleNamespace(servers=[
        SimpleNamespace(artifact=SimpleNamespace(id=name), label=name,
                        gates=[SimpleNamespace(label=label, pending=pending) for label, pending in items],
                        points=[SimpleNamespace(label=label, pending=pending) for label, pending in items])
        for name, items in servers.items()])


class _Drawn:
    def __init__(self) -> None:
        self.parts: list[tuple[LiveProgress, str, str]] = []
        self.open = False

    @contextlib.contextmanager
    def __call__(self, progress: LiveProgress, *, fold: str, logs: str) -> Iterator[None]:
        self.parts.append((progress, fold, logs))
        self.open = True
        try:
            yield
        finally:
            self.open = False


def test_the_gates_view_is_drawn_while_open_folded_by_artifact(tmp_path: Path) -> None:
    """The gates' display is open only inside the block; its fold names every artifact, its logs the run dir."""
    drawn = _Drawn()
    with LiveViews(drawn).gates(_plan(fp8=[("arith", True), ("mmlu", False)], nvfp4=[]), tmp_path) as events:
        assert drawn.open
        events.server_state("fp8", "serving")
    assert not drawn.open
    ((progress, fold, logs),) = drawn.parts
    assert progress is events and fold == "eval: fp8, nvfp4 (servers and gates)" and logs == f"logs: {tmp_path}"
    assert progress.items == {("fp8", "arith"): "pending", ("fp8", "mmlu"): "recorded"}
    assert progress.states == {"fp8": "serving", "nvfp4": "waiting"}


def test_the_speed_view_has_its_own_fold_and_logs_and_closes_on_an_error(tmp_path: Path) -> None:
    """The speed anchors' display: its fold and logs line; a failing part still closes it (the fold ends)."""
    drawn = _Drawn()
    with pytest.raises(KeyboardInterrupt), LiveViews(drawn).speed(_plan(**{"fp8 [none]": [("chat c1", True)]}),
                                                                  tmp_path):
        raise KeyboardInterrupt
    assert not drawn.open
    ((progress, fold, logs),) = drawn.parts
    assert fold == "eval --speed: servers and benchmarks" and logs == f"speed logs: {tmp_path}"
    assert progress.items == {("fp8 [none]", "chat c1"): "pending"}
