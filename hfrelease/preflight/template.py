"""A thinking gate's chat template takes the thinking switch the gate sends.

Every chat gate sends `chat_template_kwargs = {"enable_thinking": <mode == thinking>}`
(`hfrelease.evaluation.lm_eval_command.generation_kwargs`). vLLM hands those to the template and a template
that never reads `enable_thinking` ignores them silently: the "thinking" gate would measure the model's
default mode. The template is read from one small file (the tokenizer config of a local source, or of a
Hub source at its pinned revision), then rendered both ways for one user message, in a sandbox like
transformers' own; the switch is taken when the two renderings differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hfrelease.errors import ConfigProblem
from hfrelease.evaluation.plan import gate_artifacts
from hfrelease.manifest import Artifact, Manifest
from hfrelease.manifest.input_files import read_input_text

TEMPLATE_FILES = ("tokenizer_config.json", "chat_template.jinja", "chat_template.json")
# (repo, revision, filename) -> the file's local path, or None when the repo has no such file; raises
# LookupError when the source cannot be read at all.
Fetcher = Callable[[str, str, str], Path | None]


def template_text(config: Mapping[str, Any]) -> str | None:
    """The default chat template of a tokenizer_config.json / chat_template.json (a string or named list)."""
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def _token(config: Mapping[str, Any], name: str) -> str:
    value = config.get(name)
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def takes_thinking_switch(template: str, config: Mapping[str, Any] | None = None) -> bool:
    """Whether rendering one user turn with enable_thinking true and false gives different prompts."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda value, indent=None, **_: json.dumps(value, indent=indent, ensure_ascii=False)
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: "01 Jan 2026")
    config = config or {}
    context = {"messages": [{"role": "user", "content": "What is 2 + 2?"}], "add_generation_prompt": True,
               "bos_token": _token(config, "bos_token"), "eos_token": _token(config, "eos_token")}
    try:
        compiled = env.from_string(template)
        on, off = (compiled.render(**context, enable_thinking=flag) for flag in (True, False))
    except jinja2.TemplateError:
        return "enable_thinking" in template  # a template this sandbox cannot render: read it instead
    return on != off


def _read(path: Path) -> str:
    """A template or tokenizer config, bounded (a 2 GB file is refused, not read: InputFileError)."""
    return read_input_text(path, what=path.name, expected="a chat template or tokenizer config of bounded size")


def _local_template(directory: Path) -> tuple[str | None, Mapping[str, Any], str]:
    config: Mapping[str, Any] = {}
    path = directory / "tokenizer_config.json"
    if path.is_file():
        config = json.loads(_read(path))
        if template_text(config):
            return template_text(config), config, path.name
    if (directory / "chat_template.jinja").is_file():
        return _read(directory / "chat_template.jinja"), config, "chat_template.jinja"
    if (directory / "chat_template.json").is_file():
        data = json.loads(_read(directory / "chat_template.json"))
        return template_text(data), config, "chat_template.json"
    return None, config, "tokenizer_config.json"


def _serve_template(manifest: Manifest, artifact: Artifact) -> str | None:
    """The `--chat-template` of the artifact's serve args (a file or the template itself), when one is set."""
    args = [*(manifest.serve.args or []), *((artifact.serve.args or []) if artifact.serve else [])]
    value: str | None = None
    for pos, arg in enumerate(args):
        if arg == "--chat-template" and pos + 1 < len(args):
            value = args[pos + 1]
        elif arg.startswith("--chat-template="):
            value = arg.split("=", 1)[1]
    if value is None:
        return None
    path = manifest.resolve(value)
    return _read(path) if path.is_file() else value


def thinking_problems(manifest: Manifest, *, fetch: Fetcher | None) -> tuple[list[ConfigProblem], list[str]]:
    """Problems, and notes on what could not be read, for every artifact a thinking chat gate runs on.

    `fetch` downloads one file of a Hub source; None when the Hub is not reachable (then Hub sources are
    named in a note, not checked).
    """
    wanted: dict[str, int] = {}
    for index, gate in enumerate(manifest.gate):
        if gate.task is not None and gate.api == "chat" and gate.mode == "thinking":
            for artifact_id in gate_artifacts(manifest, gate):
                wanted.setdefault(artifact_id, index)
    problems: list[ConfigProblem] = []
    unread: list[str] = []
    for artifact_id, gate_index in wanted.items():
        artifact = manifest.artifact_by_id(artifact_id)
        where = f"artifact[{manifest.artifact.index(artifact)}].source"
        template: str | None = None
        origin = "--chat-template"
        config: Mapping[str, Any] = {}
        try:
            template = _serve_template(manifest, artifact)
            if template is None and artifact.source.path is not None:
                directory = manifest.resolve(artifact.source.path)
                if not directory.is_dir():
                    continue  # load_manifest reports it
                template, config, origin = _local_template(directory)
            elif template is None:
                assert artifact.source.hub is not None and artifact.source.revision is not None
                if fetch is None:
                    unread.append(artifact_id)
                    continue
                template, config, origin = _hub_template(artifact.source.hub, artifact.source.revision, fetch)
        except LookupError:
            continue  # the source itself is unreadable: hub_checks reports its revision or says why
        except (OSError, ValueError) as exc:
            problems.append(ConfigProblem(location=where, message=f"the chat template of {artifact_id!r} cannot be "
                                          f"read: {exc}"))
            continue
        gate_id = manifest.gate[gate_index].id
        if template is None:
            problems.append(ConfigProblem(location=where, message=f"{artifact_id!r} has no chat template ({origin} "
                                          f"holds none), but thinking gate {gate_id!r} serves it chat requests"))
        elif not takes_thinking_switch(template, config):
            problems.append(ConfigProblem(
                location=where,
                message=f"the chat template of {artifact_id!r} ({origin}) ignores enable_thinking: thinking gate "
                        f"{gate_id!r} would measure the model's default mode (give the template the switch, or set "
                        "the gate's mode to the model's only one)"))
    notes = [f"chat templates of Hub sources not read (the Hub is not reachable): {', '.join(unread)}"]
    return problems, notes if unread else []


def _hub_template(repo: str, revision: str, fetch: Fetcher) -> tuple[str | None, Mapping[str, Any], str]:
    config: Mapping[str, Any] = {}
    path = fetch(repo, revision, "tokenizer_config.json")
    if path is not None:
        config = json.loads(_read(path))
        if template_text(config):
            return template_text(config), config, "tokenizer_config.json"
    path = fetch(repo, revision, "chat_template.jinja")  # newer tokenizers keep it beside the config
    if path is not None:
        return _read(path), config, "chat_template.jinja"
    return None, config, "tokenizer_config.json"
