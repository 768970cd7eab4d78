"""The command line: help, check on the shipped manifests, init, error handling."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hfrelease.cli import main
from hfrelease.errors import ExitCode
from hfrelease.manifest import load_manifest
from tests.conftest import CliRun, cpu_route_env

pytestmark = pytest.mark.unit

COMMANDS = ["check", "eval", "render", "bundle", "publish", "release", "init"]


def test_help_lists_every_command(cli: CliRun) -> None:
    """`hfrelease --help` names each pipeline command and the exit codes."""
    code, out, _ = cli(["--help"])
    assert code == 0
    for command in COMMANDS:
        assert command in out
    assert "3 bad manifest" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help(command: str, cli: CliRun) -> None:
    """Every subcommand answers --help."""
    code, out, _ = cli([command, "--help"])
    assert code == 0
    assert "Usage:" in out


@pytest.mark.allow_subprocess
@pytest.mark.parametrize("args", [["--help"], ["eval", "--help"], ["check", "--help"], ["demo", "build", "--help"]])
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    """--help answers without importing vLLM, lm-eval, torch, transformers or matplotlib."""
    probe = (
        "import sys\n"
        "from hfrelease.cli import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('vllm', 'lm_eval', 'torch', 'transformers', 'matplotlib', 'pydantic')"
        " if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert "HEAVY=\n" in result.stderr or result.stderr.rstrip().endswith("HEAVY="), result.stderr


def test_check_accepts_the_flagship(repo_root: Path, cli: CliRun) -> None:
    """The Nanbeige manifest of the seeds is valid and declares its five artifacts (its plugin is the
    preflight's business: test_preflight.py)."""
    code, out, _ = cli(["check", "--json", "--no-preflight", str(repo_root / "model_cards" / "nanbeige4.2-3b")])
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True
    assert [a["id"] for a in report["artifacts"]] == [
        "bf16", "fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16", "eagle3",
    ]
    assert report["gates"] == ["gsm8k", "gpqa-diamond", "ifeval", "mmlu-pro", "bbh", "fidelity"]
    assert report["tag"] == "v1.3"


def test_check_table_output(fixture_family: Path, cli: CliRun) -> None:
    """Without --json, check prints the artifacts, gates and workloads for people."""
    code, out, err = cli(["check", str(fixture_family)])
    assert code == 0
    assert "tester/Fixture-1M-FP8-Dynamic" in out
    assert "Gates" in out and "Workloads" in out
    assert "1 manifest valid" in err


def test_check_reports_each_manifest(fixture_family: Path, tmp_path: Path, cli: CliRun) -> None:
    """Several manifests: each reported, exit 3 when any is invalid."""
    bad = tmp_path / "bad.toml"
    bad.write_text("schema_version = 1\n")
    code, out, _ = cli(["check", "--json", str(fixture_family), str(bad)])
    assert code == ExitCode.CONFIG
    reports = json.loads(out)
    assert [r["ok"] for r in reports] == [True, False]
    assert {p["location"] for p in reports[1]["problems"]} >= {"family", "artifact"}


def test_init_scaffold_passes_check(tmp_path: Path, cli: CliRun) -> None:
    """A scaffolded family is accepted by check and carries the values given; the preflight's one problem is
    the placeholder reference directory, which holds only README.txt until the weights are put there."""
    target = tmp_path / "mymodel"
    code, _, err = cli(
        ["init", str(target), "--name", "mymodel-7b", "--base-model", "acme/MyModel-7B", "--owner", "me",
         "--language", "en", "--language", "fr"],
    )
    assert code == 0, err
    assert (target / "sections" / "limitations.md").is_file()
    code, out, _ = cli(["check", "--json", "--no-preflight", str(target)])
    assert code == 0
    report = json.loads(out)
    assert report["family"] == "mymodel-7b"
    code, out, _ = cli(["check", "--json", "--offline", str(target)])
    assert code == ExitCode.CONFIG
    assert [p["location"] for p in json.loads(out)["problems"]] == ["artifact[0].source.path"]
    text = (target / "release.toml").read_text()
    assert 'languages = ["en", "fr"]' in text
    assert 'base_model = "acme/MyModel-7B"' in text


def test_init_refuses_to_overwrite(tmp_path: Path, cli: CliRun) -> None:
    """init leaves an existing release.toml alone unless --force."""
    args = ["init", str(tmp_path), "--name", "x", "--base-model", "a/b", "--owner", "me"]
    assert cli(args)[0] == 0
    (tmp_path / "release.toml").write_text("# mine\n")
    code, _, err = cli(args)
    assert code == ExitCode.USAGE  # a user mistake, never "a bug"
    assert "already exists" in err and "--force" in err
    assert (tmp_path / "release.toml").read_text() == "# mine\n"
    assert cli([*args, "--force"])[0] == 0


def test_init_rejects_bad_values(tmp_path: Path, cli: CliRun) -> None:
    """Bad init options are all named at once, before anything is written."""
    code, _, err = cli(
        ["init", str(tmp_path / "f"), "--name", "Bad Name", "--base-model", "https://x/y", "--owner", "me"])
    assert code == ExitCode.USAGE  # the command line is wrong, not a manifest: no "run check again"
    assert "--name" in err and "--base-model" in err and "hfrelease check" not in err
    assert not (tmp_path / "f").exists()


def test_init_github_outside_a_git_repository_refuses(tmp_path: Path, cli: CliRun) -> None:
    """`init --github` with no git repository above DIRECTORY says so (exit 2) and writes nothing, neither the
    family nor a `.github/` inside it."""
    target = tmp_path / "mymodel"
    code, _, err = cli(["init", str(target), "--name", "mymodel", "--base-model", "acme/My-7B", "--owner", "me",
                        "--github", "--install", "git+https://github.com/acme/hfrelease@" + "a" * 40])
    assert code == ExitCode.USAGE, err
    assert "--github" in " ".join(err.split()) and "not inside a git repository" in " ".join(err.split())
    assert not target.exists() and not (tmp_path / ".github").exists()


def test_unknown_option_is_usage_error(cli: CliRun) -> None:
    """An unknown option is Click's usage error (2)."""
    code, _, err = cli(["check", "--frobnicate"])
    assert code == ExitCode.USAGE
    assert "No such option" in err


def test_internal_error_without_traceback(
    monkeypatch: pytest.MonkeyPatch, fixture_family: Path, cli: CliRun
) -> None:
    """A bug prints one line and the debug hint; HFRELEASE_DEBUG=1 lets the traceback through."""
    import hfrelease.manifest as manifest_pkg

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(manifest_pkg, "load_manifest", broken)
    monkeypatch.delenv("HFRELEASE_DEBUG", raising=False)
    code, _, err = cli(["check", str(fixture_family)])
    assert code == ExitCode.INTERNAL
    assert "internal error: RuntimeError: boom" in err and "HFRELEASE_DEBUG=1" in err
    assert "Traceback" not in err
    monkeypatch.setenv("HFRELEASE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main(["check", str(fixture_family)])


def test_eval_dry_run_of_the_flagship_without_a_gpu(repo_root: Path, cli: CliRun) -> None:
    """--dry-run prints every vllm serve and lm_eval command of the Nanbeige family and starts nothing."""
    code, out, _ = cli(["eval", "--dry-run", "--json", str(repo_root / "model_cards" / "nanbeige4.2-3b")])
    assert code == 0
    plan = json.loads(out)
    assert [s["artifact"] for s in plan["servers"]] == ["bf16", "fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16"]
    fp8 = plan["servers"][1]
    # FP8's CPU route (torch's own matmul) is part of the command exactly where this host's vLLM would take it.
    route = "".join(f"{key}={value} " for key, value in cpu_route_env(
        load_manifest(repo_root / "model_cards" / "nanbeige4.2-3b").artifact_by_id("fp8-dynamic")).items())
    assert fp8["serve"].startswith(
        f"VLLM_ATTENTION_BACKEND=TRITON_ATTN {route}vllm serve NullSense/Nanbeige4.2-3B-FP8-Dynamic")
    assert "--reasoning-parser qwen3" in fp8["serve"] and "--kv-cache-dtype fp8" in fp8["serve"]
    # GSM8K and GPQA run under three seeds each: one command per seed, carrying it.
    gsm8k = next(g for g in fp8["gates"] if g["gate"] == "gsm8k (seed 1235)")
    assert gsm8k["command"].startswith("lm_eval --model local-chat-completions")
    assert '"enable_thinking":true' in gsm8k["command"] and "--limit 100" in gsm8k["command"]
    assert "--seed 1235" in gsm8k["command"] and '"seed":1235' in gsm8k["command"]
    # The fidelity gate: bf16 generates and scores its continuations, each of the three quants scores them.
    fidelity = {s["artifact"]: next(g["command"] for g in s["gates"] if g["gate"] == "fidelity")
                for s in plan["servers"]}
    assert fidelity["bf16"].startswith("# 36 prompts of ")
    for quant in ("fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16"):
        assert fidelity[quant].startswith("# the 36 token sequences of the reference's record of gate 'fidelity'")
        assert '"prompt_logprobs": 20' in fidelity[quant]
    assert plan["pending"] == 4 * (3 + 3 + 3 + 1)


def test_eval_speed_dry_run_marks_the_shared_gate_servers(repo_root: Path, cli: CliRun) -> None:
    """With --speed, the no-speculation speed server of an artifact that runs gates is its gate server."""
    code, out, _ = cli(["eval", "--speed", "--dry-run", "--json", str(repo_root / "model_cards" / "nanbeige4.2-3b")])
    assert code == 0
    plan = json.loads(out)
    gated = {s["artifact"] for s in plan["servers"]}
    servers = plan["speed"]["servers"]
    assert servers and {s["speculative"] for s in servers} > {"none"}
    for server in servers:
        assert server["on_gate_server"] == (server["speculative"] == "none" and server["artifact"] in gated), server
    assert any(s["on_gate_server"] for s in servers)


def test_unit_tests_cannot_leave_this_machine() -> None:
    """The sealed-unit-test guard refuses a connection to any address off loopback before it is made."""
    import socket

    with socket.socket() as sock, pytest.raises(AssertionError, match="tried to reach"):
        sock.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed
