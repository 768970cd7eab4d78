"""Files the manifest names are read bounded: a prompt set that is /dev/zero, a FIFO or a 2 GB sparse file is
refused at once with exit 3 (it was read until memory ran out: exit 1, MemoryError, "a bug")."""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import tomli_w

from hfrelease.errors import ConfigError, ExitCode
from hfrelease.manifest import load_manifest
from hfrelease.manifest.gate_rules import read_prompt_set
from hfrelease.manifest.input_files import MAX_INPUT_BYTES, MAX_WORKLOAD_BYTES, read_workload_prompts
from hfrelease.speed.plan import count_prompts

pytestmark = pytest.mark.unit

PROMPT = '{"id": "p1", "prompt": "Say hello."}\n'


def _sparse(path: Path, size: int = 2 << 30) -> Path:
    """A file of `size` bytes that takes no disk space (all zeros)."""
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dev_zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


KINDS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "/dev/zero": (_dev_zero, "not a regular file"),
    "a FIFO": (_fifo, "not a regular file"),
    "a 2 GB sparse file": (_sparse, "bytes"),
    "one byte over the cap": (lambda path: _sparse(path, MAX_INPUT_BYTES + 1), "bytes"),
}


@pytest.fixture
def quickly() -> Iterator[None]:
    """The refusal comes at once: never a hang on a FIFO or a read until memory runs out."""
    started = time.monotonic()
    yield
    assert time.monotonic() - started < 10


def _with_fidelity(family: Path, prompts: str) -> Path:
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    data["gate"].append({"id": "fid", "fidelity": prompts, "max_tokens": 8, "max_kl": 0.1})
    path.write_text(tomli_w.dumps(data))
    return family


def _problems(family: Path) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_manifest(family)
    assert caught.value.exit_code == ExitCode.CONFIG
    return {p.location: p.message for p in caught.value.problems}


@pytest.mark.usefixtures("quickly")
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_fidelity_prompt_set_that_is_not_a_bounded_file_is_refused(fixture_family: Path, kind: str) -> None:
    """`check` (every manifest load) refuses the prompt set at gate[N].fidelity, with exit 3."""
    make, words = KINDS[kind]
    make(fixture_family / "prompts" / "fid.jsonl")
    problems = _problems(_with_fidelity(fixture_family, "prompts/fid.jsonl"))
    assert words in problems["gate[2].fidelity"], problems


@pytest.mark.usefixtures("quickly")
def test_dev_zero_named_directly_is_refused(fixture_family: Path) -> None:
    """A manifest can name /dev/zero itself (an absolute path): the same refusal."""
    problems = _problems(_with_fidelity(fixture_family, "/dev/zero"))
    assert "not a regular file" in problems["gate[2].fidelity"], problems


@pytest.mark.usefixtures("quickly")
@pytest.mark.parametrize("kind", list(KINDS))
def test_eval_reads_the_prompt_set_bounded_too(tmp_path: Path, kind: str) -> None:
    """The prompt set replaced after `check` is refused when eval reads it (exit 3), never read whole."""
    make, words = KINDS[kind]
    with pytest.raises(ConfigError) as caught:
        read_prompt_set(make(tmp_path / "fid.jsonl"))
    assert caught.value.exit_code == ExitCode.CONFIG and words in caught.value.message


def test_a_prompt_set_under_the_cap_is_read(tmp_path: Path) -> None:
    """A real prompt set reads as before."""
    path = tmp_path / "fid.jsonl"
    path.write_text(PROMPT * 2 + "\n")
    assert read_prompt_set(path) == [("p1", "Say hello."), ("p1", "Say hello.")]


@pytest.mark.usefixtures("quickly")
def test_a_workload_prompt_file_too_large_to_read_is_refused(fixture_family: Path) -> None:
    """A workload's prompts over the cap are refused at check (workload[0].prompts), before eval --speed reads."""
    _sparse(fixture_family / "prompts" / "chat.jsonl", MAX_WORKLOAD_BYTES + 1)
    problems = _problems(fixture_family)
    assert "bytes" in problems["workload[0].prompts"], problems


@pytest.mark.usefixtures("quickly")
@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO", "a 2 GB sparse file"])
def test_speed_reads_workload_prompts_bounded(tmp_path: Path, kind: str) -> None:
    """The speed plan's count and the context sweep read a workload's prompts bounded: exit 3, never exit 1."""
    make, _ = KINDS[kind]
    path = make(tmp_path / "chat.jsonl")
    for read in (count_prompts, read_workload_prompts):
        with pytest.raises(ConfigError) as caught:
            read(path)
        assert caught.value.exit_code == ExitCode.CONFIG


@pytest.mark.usefixtures("quickly")
def test_a_task_dir_holding_a_fifo_or_device_is_refused_at_check(fixture_family: Path) -> None:
    """lm-eval indexes every YAML file of a gate's task_dir and hfrelease hashes every file: a FIFO there hung
    `check`. Every such entry is named at gate[i].task_dir, at once, before anything reads the directory."""
    tasks = fixture_family / "tasks"
    os.mkfifo(tasks / "evil.yaml")
    (tasks / "sub").mkdir()
    _dev_zero(tasks / "sub" / "data.jsonl")
    problems = _problems(fixture_family)
    message = problems["gate[0].task_dir"]
    assert "2 entries that are not regular files" in message, problems
    assert "evil.yaml" in message and "sub/data.jsonl" in message
