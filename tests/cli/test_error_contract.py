"""The error contract: every command's error paths end in their documented exit code; none exits 1.

Exit 1 means a bug in hfrelease. Each case below is a mistake a user makes or a state a user's machine is
in (a missing or malformed manifest, a path that is a file, a ledger that is not one, a Hub that does not
answer, a workflow that is not there), run through the CLI as typed; each must end in its own documented
code with one message and no "This is a bug in hfrelease". Faults of servers and the Hub are swept in
test_exit_codes.py; wrong --artifact/--gate/--workload names in tests/manifest/test_selection.py.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import huggingface_hub.constants  # noqa: F401  (isolated_hub_client patches it: imported before that)
import pytest
import tomli_w

from hfrelease.errors import ExitCode, HfreleaseError
from tests.conftest import CliRun

pytestmark = pytest.mark.usefixtures("lm_eval_logging")

BUG = "This is a bug in hfrelease"
DEAD_HUB = "http://127.0.0.1:9"  # nothing listens on the discard port


class Paths:
    """The places a case names: the fixture family (`f`), a file (`file`), nothing (`missing`), a scratch dir."""

    def __init__(self, family: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> None:
        self.f, self.tmp, self.monkeypatch = family, tmp, monkeypatch
        self.file = tmp / "a-file"
        self.file.write_text("not a directory\n")
        self.missing = tmp / "missing"
        self.bad = tmp / "bad"
        self.bad.mkdir()
        (self.bad / "release.toml").write_text("schema_version = 1\n[family\n")  # not TOML
        self.empty_dir = tmp / "empty"
        self.empty_dir.mkdir()


def _fifo(p: Paths) -> str:
    fifo = p.tmp / "fifo-family"
    fifo.mkdir()
    os.mkfifo(fifo / "release.toml")
    return str(fifo)


def _family_with(p: Paths, name: str, change: Callable[[dict[str, Any]], None]) -> str:
    """A copy of the fixture family whose release.toml `change` edited."""
    target = p.tmp / name
    shutil.copytree(p.f, target)
    data = tomllib.loads((target / "release.toml").read_text())
    change(data)
    (target / "release.toml").write_text(tomli_w.dumps(data))
    return str(target)


def _zero_prompts(data: dict[str, Any]) -> None:
    data["gate"].append({"id": "fid", "fidelity": "/dev/zero", "max_tokens": 8, "max_kl": 0.1})


def _code_args(data: dict[str, Any]) -> None:
    data["serve"]["args"] = ["--tool-parser-plugin", "parsers/evil.py"]


def _code_env(data: dict[str, Any]) -> None:
    data["serve"]["env"] = {"PYTHONPATH": "src", "VLLM_LOGGING_CONFIG_PATH": "logging.json"}


def _readme_only(data: dict[str, Any]) -> None:
    data["artifact"][0]["source"] = {"path": "prompts"}  # a directory of no weights (the README.txt)


def _yaml_relative(p: Paths) -> str:
    """A family whose task names its data file relative to the YAML (lm-eval reads it from the cwd)."""
    family = _family_with(p, "yaml-relative", lambda d: d["gate"][0].update(task="own_task"))
    (Path(family) / "tasks" / "own.yaml").write_text(
        "task: own_task\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: own.jsonl\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: q\ndoc_to_target: a\n")
    (Path(family) / "tasks" / "own.jsonl").write_text('{"q": "1+1=", "a": "2"}\n')
    return family


def _w4a16_over_fp8(p: Paths) -> str:
    family = _family_with(p, "w4a16", lambda d: d["artifact"][1]["quantization"].update(scheme="W4A16"))
    (Path(family) / "checkpoints" / "fp8" / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True,
                                  "dynamic": True}}}}}))
    return family


def _no_vllm(p: Paths) -> list[str]:
    """An environment without vLLM: no `vllm` beside the interpreter, none on PATH."""
    assert p.monkeypatch is not None
    p.monkeypatch.setattr("sys.executable", str(p.tmp / "bin" / "python"))
    p.monkeypatch.setenv("PATH", str(p.tmp / "bin"))
    return ["eval", str(p.f), "--artifact", "fp8", "--gate", "arith"]


Case = tuple[ExitCode, Callable[[Paths], list[str]]]
CASES: dict[str, Case] = {
    # check
    "check: no manifest there": (ExitCode.CONFIG, lambda p: ["check", str(p.missing)]),
    "check: a directory without release.toml": (ExitCode.CONFIG, lambda p: ["check", str(p.empty_dir)]),
    "check: not TOML": (ExitCode.CONFIG, lambda p: ["check", str(p.bad), "--no-preflight"]),
    "check: a FIFO as manifest": (ExitCode.CONFIG, lambda p: ["check", _fifo(p), "--no-preflight"]),
    "check --cards before any render": (ExitCode.MEASUREMENT_FAILED, lambda p: ["check", str(p.f), "--cards"]),
    "check: a fidelity prompt set that is /dev/zero": (ExitCode.CONFIG, lambda p: [
        "check", _family_with(p, "zero", _zero_prompts), "--no-preflight"]),
    "check: a serve argument that loads code": (ExitCode.CONFIG, lambda p: [
        "check", _family_with(p, "code-args", _code_args), "--no-preflight"]),
    "check: serve.env that runs code": (ExitCode.CONFIG, lambda p: [
        "check", _family_with(p, "code-env", _code_env), "--no-preflight"]),
    "check: a source without weights": (ExitCode.CONFIG, lambda p: [
        "check", _family_with(p, "no-weights", _readme_only), "--offline"]),
    "check: a task data file where lm-eval does not look": (ExitCode.CONFIG, lambda p: [
        "check", _yaml_relative(p), "--offline"]),
    "check: a declared scheme the checkpoint contradicts": (ExitCode.CONFIG, lambda p: [
        "check", _w4a16_over_fp8(p), "--offline"]),
    # init
    "init: a bad family id": (ExitCode.USAGE, lambda p: ["init", str(p.tmp / "new"), "--name", "Bad Name",
                                                         "--base-model", "a/b", "--owner", "me"]),
    "init --github: outside a git repository": (ExitCode.USAGE, lambda p: [
        "init", str(p.tmp / "new"), "--name", "x", "--base-model", "a/b", "--owner", "me", "--github"]),
    "init: into a file": (ExitCode.USAGE, lambda p: ["init", str(p.file), "--name", "x", "--base-model", "a/b",
                                                     "--owner", "me"]),
    # demo
    "demo pin: no build": (ExitCode.ENVIRONMENT, lambda p: ["demo", "pin", str(p.f), "--build", str(p.missing)]),
    # eval
    "eval: no manifest": (ExitCode.CONFIG, lambda p: ["eval", str(p.missing), "--dry-run"]),
    "eval --dry-run: a fidelity prompt set that is /dev/zero": (ExitCode.CONFIG, lambda p: [
        "eval", _family_with(p, "zero", _zero_prompts), "--dry-run"]),
    "eval: --endpoint without --artifact": (ExitCode.USAGE, lambda p: ["eval", str(p.f), "--endpoint", DEAD_HUB]),
    "eval: --workload without --speed": (ExitCode.USAGE, lambda p: ["eval", str(p.f), "--workload", "chat"]),
    "eval: --gate with --speed-only": (ExitCode.USAGE, lambda p: ["eval", str(p.f), "--speed-only", "--gate",
                                                                  "arith"]),
    "eval: --endpoint with --speed": (ExitCode.USAGE, lambda p: ["eval", str(p.f), "--speed", "--artifact", "fp8",
                                                                 "--endpoint", DEAD_HUB]),
    "eval: a task data file where lm-eval does not look": (ExitCode.CONFIG, lambda p: [
        "eval", _yaml_relative(p), "--artifact", "fp8", "--gate", "arith"]),
    "eval: a declared scheme the checkpoint contradicts": (ExitCode.CONFIG, lambda p: [
        "eval", _w4a16_over_fp8(p), "--artifact", "fp8"]),
    "eval: a source without weights": (ExitCode.CONFIG, lambda p: [
        "eval", _family_with(p, "no-weights", _readme_only), "--artifact", "ref", "--gate", "arith"]),
    "eval: vLLM not installed": (ExitCode.ENVIRONMENT, _no_vllm),
    "eval: --run-dir is a file": (ExitCode.USAGE, lambda p: ["eval", str(p.f), "--run-dir", str(p.file)]),
    # render / preview
    "render: no manifest": (ExitCode.CONFIG, lambda p: ["render", str(p.missing)]),
    "render: a ledger without the promised gates": (ExitCode.MEASUREMENT_FAILED, lambda p: ["render", str(p.f)]),
    "render --since: a ledger directory of nothing": (ExitCode.USAGE, lambda p: ["render", str(p.f), "--since",
                                                                                 str(p.empty_dir)]),
    "preview: nothing rendered": (ExitCode.USAGE, lambda p: ["preview", str(p.f), "--out", str(p.tmp / "pv")]),
    "preview: --out is a file": (ExitCode.USAGE, lambda p: ["preview", str(p.f), "--out", str(p.file)]),
    # bundle / publish / verify
    "bundle: no manifest": (ExitCode.CONFIG, lambda p: ["bundle", str(p.missing)]),
    "bundle: --out is a file": (ExitCode.USAGE, lambda p: ["bundle", str(p.f), "--out", str(p.file)]),
    "publish: a Hub that does not answer": (ExitCode.PUBLISH_FAILED, lambda p: ["publish", str(p.f), "--hub",
                                                                               DEAD_HUB]),
    "verify: a Hub that does not answer": (ExitCode.PUBLISH_FAILED, lambda p: ["verify", str(p.f), "--hub",
                                                                              DEAD_HUB]),
    # compare / ledger
    "compare: sides that are not ledgers": (ExitCode.USAGE, lambda p: ["compare", str(p.bad), str(p.empty_dir),
                                                                       "--manifest", str(p.f)]),
    "ledger merge: into a file": (ExitCode.USAGE, lambda p: ["ledger", "merge", str(p.empty_dir), "--into",
                                                             str(p.file)]),
    "ledger merge: a source that is not there": (ExitCode.USAGE, lambda p: [
        "ledger", "merge", str(p.missing), "--into", str(p.tmp / "merged")]),
    "hub serve: --root is a file": (ExitCode.USAGE, lambda p: ["hub", "serve", "--root", str(p.file)]),
    "demo build: --out is a file": (ExitCode.USAGE, lambda p: ["demo", "build", "--out", str(p.file)]),
    # release
    "release: the wrong tag": (ExitCode.CONFIG, lambda p: ["release", str(p.f), "--tag", "v9", "--only", "check"]),
    "release: --artifact without --only": (ExitCode.USAGE, lambda p: ["release", str(p.f), "--artifact", "fp8"]),
    "release: no workflow file": (ExitCode.USAGE, lambda p: ["release", str(p.f), "--workflow", str(p.missing),
                                                              "--work", str(p.tmp / "work")]),
    "release --only gate: nothing recorded": (ExitCode.MEASUREMENT_FAILED, lambda p: [
        "release", str(p.f), "--only", "gate"]),
}


@pytest.fixture
def paths(fixture_family: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_hub_client: None) -> Paths:
    """The fixture family with fake weights, a scratch directory, a cache of its own and no Hub token."""
    import numpy as np
    from safetensors.numpy import save_file

    for seed, checkpoint in enumerate(sorted((fixture_family / "checkpoints").iterdir())):
        weights = np.random.default_rng(seed).standard_normal((4, 4)).astype("float32")
        save_file({"w": weights}, str(checkpoint / "model.safetensors"))
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HFRELEASE_HUB_TIMEOUT", "2")
    return Paths(fixture_family, tmp_path / "scratch", monkeypatch)


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()


@pytest.mark.parametrize("case", list(CASES))
def test_error_paths_never_exit_1(case: str, paths: Paths, cli: CliRun) -> None:
    """Each error path ends in its documented code with one message, never 1 or "a bug"."""
    expected, args = CASES[case]
    code, _, err = cli(args(paths))
    assert code == expected, err
    assert BUG not in err and err.count("error:") <= 1, err


def test_every_error_class_has_its_own_exit_code() -> None:
    """The base error has no exit code: each class of user-facing failure names one, and never 1 (a bug)."""
    import importlib
    import inspect
    import pkgutil

    import hfrelease

    for module in pkgutil.walk_packages(hfrelease.__path__, "hfrelease."):
        if module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)
    classes: list[type[HfreleaseError]] = []
    pending = [HfreleaseError]
    while pending:
        cls = pending.pop()
        classes.append(cls)
        pending.extend(cls.__subclasses__())
    assert "exit_code" not in vars(HfreleaseError)
    with pytest.raises(TypeError):
        HfreleaseError("no class of failure")
    for cls in classes[1:]:
        if "exit_code" in inspect.signature(cls).parameters:  # the caller names the code (a rehearsal's job)
            continue
        assert cls.exit_code not in (ExitCode.OK, ExitCode.INTERNAL), cls
