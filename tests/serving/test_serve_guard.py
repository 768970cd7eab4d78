"""The serve guard: manifest args and env are judged as vLLM's own parser reads them, never as strings."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hfrelease.errors import ConfigError, ExitCode
from hfrelease.manifest import Manifest
from hfrelease.manifest.loading import validate_manifest
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.serving.guard import LOOPBACK, command_problems, manifest_problems, vllm_parser
from hfrelease.serving.process import VllmServer
from tests.manifest.test_manifest_fuzz import VALID

pytestmark = pytest.mark.unit

ANY = "0.0.0.0"  # noqa: S104 - the address the guard must refuse
FAMILY = Path(__file__).resolve().parent.parent / "fixtures" / "family"
OWN = ["vllm", "serve", "/m", "--served-model-name", "o/m", "--host", "127.0.0.1", "--port", "8000"]

needs_vllm = pytest.mark.skipif(vllm_parser() is None, reason="vLLM is not installed here")


def with_serve(args: list[str] | None = None, env: dict[str, str] | None = None, **keys: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    serve = data.setdefault("serve", {})
    if args is not None:
        serve["args"] = args
    if env is not None:
        serve["env"] = env
    serve.update(keys)
    return data


def problems_of(data: dict[str, Any]) -> list[str]:
    try:
        validate_manifest(data, root=FAMILY, check_files=False)
    except ConfigError as exc:
        return [p.render() for p in exc.problems]
    return []


def command(args: list[str]) -> ServeCommand:
    return ServeCommand(argv=(*OWN, *args), served_model_name="o/m", args_span=(len(OWN), len(OWN) + len(args)))


@pytest.mark.parametrize(
    "args",
    [
        ["--trust_remote_code"],
        ["--trust-remote"],  # an argparse prefix
        ["--config", "serve.yaml"],  # a YAML file can turn on trust-remote-code
        ["--config=serve.yaml"],
        ["--hos", ANY],
        ["--api_key", "x"],
        ["--port=9000"],
        ["--speculative-config.method", "ngram"],  # dotted keys build the JSON option
        ["-sc", "{}"],
        ["--served_model_name", "someone/else"],
    ],
)
def test_owned_options_are_refused_however_spelt(args: list[str]) -> None:
    """Spellings vLLM's argparse maps to an owned option are refused at load, without vLLM."""
    found = problems_of(with_serve(args))
    assert found and all("serve" in p for p in found), found


@pytest.mark.parametrize(
    "env",
    [{"OPENAI_KEY": "x"}, {"hf_tok": "y"}, {"Github_Token": "z"}, {"DB_PASSWORD": "p"},
     {"NOTE": "hf_" + "A1b2C3d4E5f6G7h8I9j0"}, {"NOTE": "Bearer abcdefghijklmnop"}],
)
def test_secret_env_names_and_values_are_refused(env: dict[str, str]) -> None:
    """Credential-like env names and token-shaped values are refused whatever their case."""
    found = problems_of(with_serve(env=env))
    assert found and any("secret" in p or "token" in p for p in found), found
    assert not any(v in p for p in found for v in env.values() if len(v) > 1)  # never echoed


def test_vllm_settings_with_token_in_their_name_are_kept() -> None:
    """vLLM's own settings that mention tokens are not mistaken for secrets."""
    env = {"VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE": "1", "TOKENIZERS_PARALLELISM": "false",
           "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert problems_of(with_serve(env=env)) == []


@needs_vllm
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--trust-remote"], "trust_remote_code"),
        (["--hos", ANY], "host"),
        (["--api_key", "sekrit"], "api_key"),
        (["--config", "serve.yaml"], "from a file"),
        (["--config=serve.yaml"], "config"),
        (["-sc", "{}"], "speculative_config"),
        (["--frobnicate"], "refuses"),  # what vLLM cannot parse is refused, not guessed at
        (["--help"], "refuses"),
    ],
)
def test_vllm_parser_reads_the_namespace(args: list[str], words: str) -> None:
    """vLLM's parser, not string comparison, decides: prefixes, '_' spellings, config files, unknown args."""
    found = command_problems(command(args))
    assert found and any(words in p for p in found), found
    assert not any("sekrit" in p for p in found)


@needs_vllm
def test_harmless_args_pass_the_parser() -> None:
    """Arguments that change no owned option pass."""
    assert command_problems(command(["--enforce-eager", "--max-num-seqs", "4", "-O3"])) == []


@needs_vllm
def test_server_start_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """VllmServer.start parses the exact command first: a bad one exits 3 and starts nothing."""
    def popen(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("started")

    server = VllmServer(command(["--hos", ANY]), log_path=tmp_path / "log", port=8000, popen=popen)
    with pytest.raises(ConfigError) as caught:
        server.start()
    assert caught.value.exit_code == ExitCode.CONFIG


@needs_vllm
def test_check_reports_what_only_the_parser_sees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`hfrelease check` runs the parser guard: an argument vLLM cannot parse is exit 3 before anything runs."""
    import shutil

    import tomli_w

    from hfrelease.cli import main

    family = tmp_path / "family"
    shutil.copytree(FAMILY, family)
    data = with_serve(["--enforce-eager", "--frobnicate"])
    (family / "release.toml").write_text(tomli_w.dumps(data))
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(family)])
    assert exit_info.value.code == ExitCode.CONFIG
    assert "--frobnicate" in capsys.readouterr().err


# Building blocks of serve arguments: owned options in many spellings, harmless options, values.
_options = st.sampled_from([
    "--trust-remote-code", "--trust_remote_code", "--trust-remote", "--trust", "--tru", "--no-trust-remote-code",
    "--host", "--hos", "--ho", "--HOST", "--port", "--api-key", "--api_key", "--config", "--conf", "--uds",
    "--served-model-name", "--model", "--speculative-config", "-sc", "--spec-method", "--hf-token",
    "--enforce-eager", "--max-num-seqs", "--dtype", "--seed", "--tokenizer-mode", "--disable-log-stats",
    "--", "-h", "--help",
])
_values = st.sampled_from([ANY, "::", "127.0.0.1", "8001", "true", "x", "serve.yaml", "{}", "auto", "4"])
_arg = st.one_of(
    _options,
    _values,
    st.builds(lambda o, v: f"{o}={v}", _options, _values),
    st.builds(lambda o, v: f"{o}.{v}", _options, st.sampled_from(["method", "model", "x"])),
)
_args = st.lists(_arg, max_size=5)


def _served(manifest: Manifest) -> list[Any]:
    """Every artifact's run command as vLLM's own (unguarded) parser reads it."""
    parser = vllm_parser()
    assert parser is not None
    namespaces = []
    for artifact in manifest.artifact:
        cmd = build_serve_command(manifest, artifact, model="/m", host="127.0.0.1", port=8000)
        namespaces.append(parser.parse_args(list(cmd.argv[1:])))
    return namespaces


@needs_vllm
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family_args=_args, artifact_args=_args, trust=st.sampled_from([None, False, True]))
def test_no_accepted_manifest_serves_remote_code_or_off_loopback(
    family_args: list[str], artifact_args: list[str], trust: bool | None
) -> None:
    """Property: whatever the args, an accepted manifest serves remote code only with trust_remote_code = true,
    and only on a loopback host."""
    data = with_serve(family_args)
    if trust is not None:
        data["serve"]["trust_remote_code"] = trust
    data["artifact"][1].setdefault("serve", {})["args"] = artifact_args
    try:
        manifest = validate_manifest(data, root=FAMILY, check_files=False)
    except ConfigError:
        return
    if manifest_problems(manifest):
        return
    for namespace in _served(manifest):
        assert namespace.trust_remote_code is (trust is True)
        assert namespace.host in LOOPBACK
        assert namespace.api_key is None and namespace.config is None


@needs_vllm
def test_dry_run_uses_the_same_guard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`eval --dry-run` refuses args vLLM's parser refuses (exit 3) and prints no plan, only the error's JSON."""
    import shutil

    import tomli_w

    from hfrelease.cli import main

    family = tmp_path / "family"
    shutil.copytree(FAMILY, family)
    (family / "release.toml").write_text(tomli_w.dumps(with_serve(["--frobnicate"])))
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(family), "--dry-run", "--json"])
    captured = capsys.readouterr()
    assert exit_info.value.code == ExitCode.CONFIG, captured.err
    assert "--frobnicate" in captured.err
    assert json.loads(captured.out)["error"]["kind"] == "ConfigError" and "servers" not in captured.out


def test_without_vllm_check_says_only_spelling_was_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where vLLM is not importable, check passes a clean manifest and says the parser guard did not run."""
    from hfrelease.cli import main
    from hfrelease.serving import guard

    monkeypatch.setattr(guard, "vllm_parser", lambda: None)
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(FAMILY), "--no-preflight"])
    assert exit_info.value.code == 0
    assert "checked by their spelling only" in capsys.readouterr().err
