"""`eval --dry-run [--speed]` prints exactly what runs: each printed line against the call the runners make.

The printed `lm_eval` line is parsed by lm-eval's own command line into the `simple_evaluate` arguments it
would pass; the printed `vllm serve` line by vLLM's own parser; the printed `vllm bench serve` argvs are
compared word for word with the ones the speed runner hands its benchmark runner.
"""

from __future__ import annotations

import inspect
import json
import shlex
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.cli import main
from hfrelease.evaluation.plan import plan_eval
from hfrelease.files.hashing import ContentHash, FileHash
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from hfrelease.serving.process import Endpoint
from hfrelease.speed.plan import plan_speed
from tests.conftest import cpu_route_env

pytestmark = pytest.mark.unit

BASE = "http://127.0.0.1:8000"  # what `<port>` stands for in these tests


@pytest.fixture(autouse=True)
def _hash_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "hfrelease-cache"))


def _dry_run(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--dry-run", "--json", *args])
    captured = capsys.readouterr()
    assert exit_info.value.code in (0, None), captured.err
    data: dict[str, Any] = json.loads(captured.out)
    return data


def _at(line: str, run_dir: Path) -> str:
    return line.replace("http://127.0.0.1:<port>", BASE).replace("<run dir>", str(run_dir))


@pytest.fixture
def weighted_family(fixture_family: Path) -> Path:
    """The fixture family with a (fake) weight file per checkpoint, so the CLI can hash it."""
    for checkpoint in (fixture_family / "checkpoints").iterdir():
        (checkpoint / "model.safetensors").write_bytes(checkpoint.name.encode())
    return fixture_family


@pytest.fixture
def family(weighted_family: Path) -> Path:
    """The fixture family with lm-eval gates of every shape: thinking with sampling, log-likelihood with
    few-shot examples and a local tokenizer, and the fixture's own non-thinking gate."""
    fixture_family = weighted_family
    path = fixture_family / "release.toml"
    data = tomllib.loads(path.read_text())
    data["gate"] += [
        {"id": "think", "task": "fixture_task", "task_dir": "tasks", "mode": "thinking", "limit": 5,
         "max_tokens": 64, "temperature": 0.6, "top_p": 0.95, "seed": 7, "metric": "exact_match,none",
         "margin": 0.05},
        {"id": "loglik", "task": "fixture_task", "task_dir": "tasks", "api": "completions", "mode": "non-thinking",
         "num_fewshot": 2, "max_tokens": 1, "metric": "acc,none", "margin": 0.05},
    ]
    path.write_text(tomli_w.dumps(data))
    return fixture_family


def _lm_eval_cli(line: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    """What lm-eval 0.4.13's own command line makes of `line`: its config, and the `simple_evaluate`
    arguments `lm_eval/_cli/run.py` passes from it. Left out: the model name and arguments (compared
    separately), batch_size/max_batch_size/device (used only to build a model from its name: the Python call
    passes a built one) and the evaluation tracker (file output)."""
    from lm_eval._cli import HarnessCLI
    from lm_eval.config.evaluate_config import EvaluatorConfig

    argv = shlex.split(line)
    assert argv[0] == "lm_eval"
    monkeypatch.setattr(sys, "argv", argv)
    cfg = EvaluatorConfig.from_cli(HarnessCLI().parse_args())
    seeds = cfg.seed or [None] * 4
    kwargs = {
        "num_fewshot": cfg.num_fewshot, "use_cache": cfg.use_cache,
        "cache_requests": cfg.cache_requests.get("cache_requests", False),
        "rewrite_requests_cache": cfg.cache_requests.get("rewrite_requests_cache", False),
        "delete_requests_cache": cfg.cache_requests.get("delete_requests_cache", False),
        "limit": cfg.limit, "samples": cfg.samples, "check_integrity": cfg.check_integrity,
        "write_out": cfg.write_out, "log_samples": cfg.log_samples, "system_instruction": cfg.system_instruction,
        "apply_chat_template": cfg.apply_chat_template, "fewshot_as_multiturn": cfg.fewshot_as_multiturn,
        "gen_kwargs": cfg.gen_kwargs, "predict_only": cfg.predict_only, "random_seed": seeds[0],
        "numpy_random_seed": seeds[1], "torch_random_seed": seeds[2], "fewshot_random_seed": seeds[3],
        "confirm_run_unsafe_code": cfg.confirm_run_unsafe_code, "verbosity": cfg.verbosity,
    }
    return cfg, kwargs


class _Recorded:
    """Stands in for lm-eval's model classes, task manager and `simple_evaluate`: records what they receive."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import lm_eval
        import lm_eval.tasks

        from hfrelease.evaluation import lm_eval_gate

        recorded = self
        real_chat, real_completions = lm_eval_gate._model_classes()

        def model_class(real: type[Any]) -> type[Any]:
            class Model:
                def __init__(self, **kwargs: Any) -> None:
                    recorded.calls.append({"class": real, "model_args": kwargs})

            return Model

        class TaskManager:
            def __init__(self, include_path: str | None = None, metadata: dict[str, Any] | None = None) -> None:
                recorded.calls[-1] |= {"include_path": include_path, "task_metadata": metadata}

        def simple_evaluate(*, model: Any, tasks: list[str], task_manager: Any, **kwargs: Any) -> dict[str, Any]:
            recorded.calls[-1] |= {"tasks": tasks, "evaluate": kwargs}
            return {"results": {tasks[0]: {"exact_match,none": 1.0, "acc,none": 1.0}}, "samples": {}}

        monkeypatch.setattr(lm_eval_gate, "_model_classes", lambda: (model_class(real_chat),
                                                                      model_class(real_completions)))
        monkeypatch.setattr(lm_eval.tasks, "TaskManager", TaskManager)
        monkeypatch.setattr(lm_eval, "simple_evaluate", simple_evaluate)


class _FinishedProcess:
    """Stands in for a gate's process that has already ended."""

    exitcode = 0

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        pass


def run_gates_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The concurrent schedule with each gate's lm-eval run made in this process, as its process would make it
    (so that what lm-eval receives can be recorded here), one gate at a time in the order they start."""
    import multiprocessing

    from hfrelease.evaluation import gate_process, schedule
    from hfrelease.evaluation.lm_eval_gate import run_lm_eval_gate

    def start_gate(gate: Any, call: Any, *, cache: Any, log_path: Path, slots: Any) -> tuple[Any, Any]:
        receiver, sender = multiprocessing.Pipe(duplex=False)
        try:
            sender.send(("result", run_lm_eval_gate(gate, call, cache=cache, slots=slots)))
        except Exception as exc:  # handed over as the gate's process does
            sender.send(("error", gate_process._failure(exc)))
        sender.close()
        return _FinishedProcess(), receiver

    monkeypatch.setattr(schedule, "start_gate", start_gate)


@pytest.mark.parametrize("schedule", ["concurrent", "sequential"])
def test_printed_lm_eval_line_is_the_python_call(
    family: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    lm_eval_logging: None, schedule: str,
) -> None:
    """Each printed `lm_eval` line, read by lm-eval's own CLI, gives the model class, model arguments, tasks,
    task directory and every `simple_evaluate` argument the gate runner passes (the rest at their defaults),
    whether the gates run at once (sharing the artifact's budget) or one after another."""
    import lm_eval
    from lm_eval.api.registry import get_model

    from hfrelease.evaluation import records, runner

    manifest_path = family / "release.toml"
    manifest_path.write_text(manifest_path.read_text() + f'\n[eval]\nschedule = "{schedule}"\nin_flight = 5\n')
    run_gates_in_process(monkeypatch)

    printed = {g["gate"]: g["command"] for g in _dry_run([str(family), "--artifact", "ref"], capsys)["servers"][0]
               ["gates"]}
    recorded = _Recorded()
    defaults = {name: p.default for name, p in inspect.signature(lm_eval.simple_evaluate).parameters.items()}
    recorded.install(monkeypatch)
    monkeypatch.setattr(runner, "check_identity", lambda endpoint, model: None)
    monkeypatch.setattr(records, "hardware", dict)  # would ask nvidia-smi
    manifest = load_manifest(family)
    plan = plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref"],
                     gates=["arith", "think", "loglik"])
    runner.run_eval(plan, ledger=Ledger(tmp_path / "ledger"), run_dir=tmp_path / "run", endpoint=BASE)
    assert len(recorded.calls) == 3
    for gate_job, call in zip(plan.servers[0].gates, recorded.calls, strict=True):
        cfg, cli = _lm_eval_cli(_at(printed[gate_job.gate.id], tmp_path), monkeypatch)
        assert issubclass(call["class"], get_model(cfg.model))
        assert call["model_args"] == cfg.model_args
        assert call["tasks"] == cfg.tasks and call["include_path"] == cfg.include_path
        assert call["task_metadata"] == cfg.metadata == call["evaluate"].pop("metadata")
        assert set(call["evaluate"]) <= set(cli), "an argument the command line cannot give"
        for name, value in cli.items():
            # lm-eval's CLI reads --limit as a float; its evaluator takes int(limit) of a limit >= 1.
            assert call["evaluate"].get(name, defaults[name]) == value, name
    concurrency = {call["model_args"]["num_concurrent"] for call in recorded.calls}
    assert concurrency == ({5} if schedule == "concurrent" else {g.gate.num_concurrent for g in plan.servers[0].gates})
    think = recorded.calls[1]
    assert think["model_args"]["think_end_token"] == "</think>"
    assert think["evaluate"]["gen_kwargs"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert recorded.calls[2]["model_args"]["tokenizer"] == str(plan.servers[0].model_dir)


def test_thinking_gate_line_keeps_only_the_answer(repo_root: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The flagship's thinking gates print `think_end_token` `</think>` (lm-eval then scores what follows the
    think block), as the Python call passes; non-thinking chat gates carry it too, as the call does."""
    plan = _dry_run([str(repo_root / "model_cards" / "nanbeige4.2-3b"), "--artifact", "fp8-dynamic"], capsys)
    for gate in (g for g in plan["servers"][0]["gates"] if g["gate"] != "fidelity"):  # not lm-eval: raw requests
        cfg, cli = _lm_eval_cli(_at(gate["command"], Path("/tmp/run")), monkeypatch)  # noqa: S108 - never written
        assert cfg.model_args["think_end_token"] == "</think>", gate["gate"]
        assert cfg.model_args["model"] == "NullSense/Nanbeige4.2-3B-FP8-Dynamic"
        thinking = gate["gate"].split(" (seed ")[0] in ("gsm8k", "gpqa-diamond")  # one line per seed of seeds
        assert cli["gen_kwargs"]["chat_template_kwargs"] == {"enable_thinking": thinking}


def test_hub_source_tokenizer_is_pinned(family: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log-likelihood gate of a Hub source not downloaded yet names the tokenizer by repo id and the pinned
    revision, which lm-eval's CLI hands the model class (it loads the tokenizer at that revision)."""
    from hfrelease.evaluation.plan import ModelFiles, gate_call

    manifest = load_manifest(family)
    gate = next(g for g in manifest.gate if g.id == "loglik")
    files = ModelFiles(name="upstream/Fixture-1M", revision="a" * 40)
    call = gate_call(manifest, gate, base_url=BASE, model="upstream/Fixture-1M", files=files)
    cfg, _ = _lm_eval_cli(call.display(output_path="out"), monkeypatch)
    assert cfg.model_args["tokenizer"] == "upstream/Fixture-1M" and cfg.model_args["revision"] == "a" * 40
    assert cfg.model_args == call.model_args


def test_flagship_speed_dry_run_prints_every_server_and_benchmark(repo_root: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Every speed server of the Hub-pinned flagship prints its `vllm serve` (repo id at the pinned revision,
    the draft's too) and every point its warm-up and repeat `vllm bench serve` commands; nothing says None."""
    manifest = load_manifest(repo_root / "model_cards" / "nanbeige4.2-3b")
    data = _dry_run(["--speed", str(repo_root / "model_cards" / "nanbeige4.2-3b")], capsys)["speed"]
    assert data["servers"]
    for server in data["servers"]:
        artifact = manifest.artifact_by_id(server["artifact"])
        assert server["serve"] is not None, server["artifact"]
        env, argv = _shell_words(server["serve"])
        assert env == {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN", **cpu_route_env(artifact)} and argv == server["argv"]
        assert argv[:3] == ["vllm", "serve", artifact.source.hub], server
        assert argv[argv.index("--revision") + 1] == artifact.source.revision
        if server["draft"] is not None:
            config = json.loads(argv[argv.index("--speculative-config") + 1])
            draft = manifest.artifact_by_id(server["draft"])
            assert (config["model"], config["revision"]) == (draft.source.hub, draft.source.revision)
        for point in server["points"]:
            assert len(point["commands"]) == (1 if point["warmups"] else 0) + 1 + point["repeats"], point
            for command in point["commands"]:
                words = shlex.split(command)
                assert words[:3] == ["vllm", "bench", "serve"] and "None" not in words
                tokenizer = words[words.index("--tokenizer") + 1]
                assert tokenizer.endswith(f"/snapshots/{artifact.source.revision}")
    text = capsys.readouterr().out
    assert "None" not in text


class _FakeServer:
    """A started server as the speed runner sees it: alive, at BASE, no memory figures."""

    endpoint = Endpoint(base_url=BASE, model="")
    died = None

    def __init__(self) -> None:
        from hfrelease.serving.alarm import Alarm

        self.alarm = Alarm()

    def arm(self) -> None:
        pass

    def disarm(self) -> None:
        pass

    def check_alive(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def runtime(self) -> dict[str, Any]:
        return {}

    def memory(self) -> dict[str, Any]:
        return {}


def _hasher(directory: Path, **_: Any) -> ContentHash:
    import hashlib

    sha = hashlib.sha256(directory.name.encode()).hexdigest()
    return ContentHash(sha256=sha, files=(FileHash(path="model.safetensors", size=1, sha256=sha),), bytes_read=0)


RESULT = {"duration": 1.0, "completed": 2, "failed": 0, "total_output_tokens": 10, "output_throughput": 10.0,
          **{f"{p}_{n}_ms": 1.0 for n in ("ttft", "tpot", "itl", "e2el") for p in ("median", "p90", "p99")}}


def test_printed_speed_commands_are_what_the_runner_executes(
    weighted_family: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Word for word: each server's printed `vllm serve` argv and environment is the command the speed runner
    starts, and each point's printed `vllm bench serve` argvs are the ones it runs, in order."""
    from hfrelease.speed import records, runner

    data = _dry_run(["--speed-only", str(weighted_family)], capsys)["speed"]
    started: list[Any] = []
    executed: list[list[str]] = []

    def launch(command: Any, **_: Any) -> _FakeServer:
        started.append(command)
        return _FakeServer()

    def bench_runner(argv: Any, log_path: Path) -> None:
        executed.append(list(argv))
        out = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(RESULT))

    monkeypatch.setattr(runner, "launch", launch)
    monkeypatch.setattr(runner, "ensure_plugin", lambda *a, **k: None)
    monkeypatch.setattr(runner, "ensure_route", lambda *a, **k: None)  # the CPU routes' plugin (FP8 on AMX)
    monkeypatch.setattr(runner, "free_port", lambda: 8000)
    monkeypatch.setattr(runner, "vllm_executable", lambda: "vllm")
    monkeypatch.setattr(runner, "_snapshot", lambda *a: "")
    monkeypatch.setattr(records, "hardware", dict)  # would ask nvidia-smi
    run_dir = tmp_path / "run"
    plan = plan_speed(load_manifest(weighted_family), ledger=Ledger(weighted_family / "results"), hash_cache=None,
                      hasher=_hasher)
    runner.run_speed(plan, ledger=Ledger(tmp_path / "ledger"), run_dir=run_dir, bench_runner=bench_runner,
                     preload=False)
    assert len(started) == len(data["servers"]) > 1
    for command, server in zip(started, data["servers"], strict=True):
        env, words = _shell_words(server["serve"].replace("<port>", "8000"))
        assert list(command.argv) == words == [w.replace("<port>", "8000") for w in server["argv"]]
        assert dict(command.env) == env
    printed_bench = [shlex.split(_at(c, run_dir)) for s in data["servers"] for p in s["points"] for c in p["commands"]]
    assert executed == printed_bench


def _vllm_serve_namespace(argv: list[str]) -> dict[str, Any]:
    """`vllm serve` argv (without the program) as vLLM's own `serve` parser reads it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")  # type: ignore[no-untyped-call,unused-ignore]
    ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    assert argv[0] == "serve"
    namespace: dict[str, Any] = vars(parser.parse_args(argv))
    namespace.pop("dispatch_function", None)
    return namespace


def _shell_words(line: str) -> tuple[dict[str, str], list[str]]:
    """A printed shell line split into its environment assignments and its argv."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while "=" in words[0] and not words[0].startswith("-"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


@pytest.mark.allow_subprocess  # importing vLLM's CLI runs `file -b` (py-cpuinfo's platform.architecture())
def test_printed_serve_line_parses_as_the_started_one(
    weighted_family: Path, repo_root: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The printed `vllm serve` line, read by vLLM's own parser, is the namespace of the command the gate and
    speed runners start; a Hub source's line differs from the downloaded run only in naming the files."""
    from hfrelease.evaluation.plan import model_files, serve_command
    from hfrelease.speed.runner import serve_command as speed_serve_command

    gate_plan = _dry_run([str(weighted_family), "--artifact", "fp8"], capsys)
    env, words = _shell_words(gate_plan["servers"][0]["serve"].replace("<port>", "8000"))
    manifest = load_manifest(weighted_family)
    plan = plan_eval(manifest, ledger=Ledger(weighted_family / "results"), hash_cache=None, artifacts=["fp8"],
                     hasher=_hasher)
    started = serve_command(manifest, plan.servers[0], port=8000, vllm="/opt/venv/bin/vllm")
    assert env == dict(started.env)
    assert _vllm_serve_namespace(words[1:]) == _vllm_serve_namespace(list(started.argv[1:]))

    flagship = repo_root / "model_cards" / "nanbeige4.2-3b"
    speed = _dry_run(["--speed-only", str(flagship), "--artifact", "eagle3"], capsys)["speed"]
    manifest = load_manifest(flagship)
    speed_plan = plan_speed(manifest, ledger=Ledger(flagship / "results"), hash_cache=None, artifacts=["eagle3"],
                            download=False)
    for printed, job in zip(speed["servers"], speed_plan.servers, strict=True):
        _, words = _shell_words(printed["serve"].replace("<port>", "8000"))
        # The run serves the downloaded snapshots (where the printed --revision puts them) under the repo id.
        downloaded = replace(job, model_dir=Path(model_files(job.artifact, None).local_dir),
                             draft_dir=Path(model_files(job.draft, None).local_dir) if job.draft else None)
        ours = _vllm_serve_namespace(words[1:])
        theirs = _vllm_serve_namespace(list(speed_serve_command(speed_plan, downloaded, port=8000).argv[1:]))
        assert ours.pop("model_tag") == job.artifact.source.hub == job.artifact.repo
        assert ours.pop("revision") == job.artifact.source.revision and theirs.pop("revision") is None
        assert Path(theirs.pop("model_tag")).name == job.artifact.source.revision
        assert ours.pop("served_model_name") is None and theirs.pop("served_model_name") == [job.artifact.repo]
        spec_ours, spec_theirs = ours.pop("speculative_config"), theirs.pop("speculative_config")
        if job.draft is not None:
            assert spec_ours.pop("revision") == job.draft.source.revision
            assert spec_ours.pop("model") == job.draft.source.hub
            assert Path(spec_theirs.pop("model")).name == job.draft.source.revision
        assert spec_ours == spec_theirs
        assert ours == theirs


def test_dry_run_says_why_a_hub_source_is_not_identified(repo_root: Path, capsys: pytest.CaptureFixture[str],
                                                         public_hub: None) -> None:
    """Offline, each Hub-pinned server in a dry run names the endpoint and offline mode as why nothing is looked up."""
    family = str(repo_root / "model_cards" / "nanbeige4.2-3b")
    data = _dry_run(["--speed", family], capsys)
    for server in [*data["servers"], *data["speed"]["servers"]]:
        assert "https://huggingface.co" in server["unknown"] and "HF_HUB_OFFLINE=1" in server["unknown"], server
    with pytest.raises(SystemExit):
        main(["eval", "--dry-run", "--speed", family])
    notes = [line for line in capsys.readouterr().out.splitlines() if "note:" in line]
    assert len(notes) == len(data["servers"]) + len(data["speed"]["servers"])
    assert all("recorded results not looked up" in n and "cannot read it from https://huggingface.co" in n
               for n in notes)


def test_hub_error_blames_offline_mode_only_when_it_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreadable Hub source names its endpoint; offline mode is named only when it is what is on."""
    from huggingface_hub import constants

    from hfrelease.files.sources import _hub_error

    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.example.org")
    for offline in (True, False):
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
        message = _hub_error("o/n", "a" * 40, OSError("no route")).message
        assert "cannot read it from https://hub.example.org" in message and "no route" in message
        assert ("HF_HUB_OFFLINE=1" in message) is offline
