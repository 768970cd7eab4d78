"""The exact `vllm serve` invocation for an artifact, built from the manifest (a pure function).

The same function makes the command a card prints (model named by its Hub repo id, no host/port) and
the one hfrelease runs (model at its local path, on a free port): both come from one configuration, so
"the serve command printed in a card is the one that was measured" holds by construction.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from hfrelease.manifest import Artifact, Manifest, Serve, Speculative
from hfrelease.redact import redact, redact_env

DEFAULT_STARTUP_TIMEOUT = 600.0


@dataclass(frozen=True, kw_only=True)
class ServeCommand:
    """A `vllm serve` command: arguments, the environment it adds, and what it serves."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    served_model_name: str
    plugin: str | None = None  # plugin directory to `pip install --no-deps` first
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    speculative: str = "none"  # id of the speculative config, "none" without
    # argv[start:end] came from the manifest's `args` (the serve guard parses the command with and without
    # them); None for a command not built from a manifest.
    args_span: tuple[int, int] | None = None

    def display(self) -> str:
        """Shell form with the environment prefixed, secrets redacted: what people copy."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in redact_env(dict(self.env)).items())
        return redact((env + " " if env else "") + shlex.join(self.argv))

    def identity(self) -> dict[str, object]:
        """What decides whether two servers are the same configuration (for caching and reuse)."""
        return {"argv": list(self.argv), "env": dict(sorted(self.env.items())), "plugin": self.plugin}


def merged_serve(defaults: Serve, override: Serve | None) -> Serve:
    """Family defaults with an artifact's overrides on top: args appended, env merged, the rest replaced."""
    if override is None:
        return defaults
    values = defaults.model_dump()
    for name, value in override.model_dump().items():
        if value is None:
            continue
        if name == "args":
            values["args"] = [*(defaults.args or []), *value]
        elif name == "env":
            values["env"] = {**(defaults.env or {}), **value}
        else:
            values[name] = value
    return Serve.model_validate(values)


def speculative_config(
    spec: Speculative, *, draft_model: str | None, draft_revision: str | None = None
) -> dict[str, object]:
    """vLLM's --speculative-config JSON for a manifest speculative config."""
    config: dict[str, object] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.prompt_lookup_max is not None:  # ngram / ngram_gpu (the manifest refuses them elsewhere)
        config["prompt_lookup_max"] = spec.prompt_lookup_max
    if spec.prompt_lookup_min is not None:
        config["prompt_lookup_min"] = spec.prompt_lookup_min
    # Without a draft artifact there is no model to name: vLLM's method loads none (ngram, suffix) or the
    # target's own weights (mtp, dspark); which methods need one is checked against vLLM (serving.spec_methods).
    if spec.draft is not None:
        if draft_model is None:
            raise ValueError(f"speculative config {spec.id!r} needs the draft model's location")
        config["model"] = draft_model
        if draft_revision is not None:
            config["revision"] = draft_revision
    if spec.rejection_sample_method is not None:
        config["rejection_sample_method"] = spec.rejection_sample_method
    if spec.synthetic_acceptance_length is not None:
        config["synthetic_acceptance_length"] = spec.synthetic_acceptance_length
    return config


def build_serve_command(
    manifest: Manifest,
    artifact: Artifact,
    *,
    model: str,
    speculative: Speculative | None = None,
    draft_model: str | None = None,
    revision: str | None = None,
    draft_revision: str | None = None,
    host: str | None = None,
    port: int | None = None,
    vllm: str = "vllm",
) -> ServeCommand:
    """The `vllm serve` command for `artifact` at `model` (a local directory or a Hub repo id).

    `host`/`port` are left out for the public form a card prints; hfrelease passes them when it runs it.
    `revision` / `draft_revision` pin a Hub repo id given as `model` / `draft_model` (a dry run's form of
    a Hub source that is not downloaded yet).
    """
    serve = merged_serve(manifest.serve, artifact.serve)
    argv: list[str] = [vllm, "serve", model]
    if model != artifact.repo:  # served under its Hub name wherever the files come from
        argv += ["--served-model-name", artifact.repo]
    if revision is not None:
        argv += ["--revision", revision]
    if host is not None:
        argv += ["--host", host]
    if port is not None:
        argv += ["--port", str(port)]
    if serve.trust_remote_code:
        argv.append("--trust-remote-code")
    if serve.dtype:
        argv += ["--dtype", serve.dtype]
    if serve.max_model_len:
        argv += ["--max-model-len", str(serve.max_model_len)]
    if serve.kv_cache_dtype:
        argv += ["--kv-cache-dtype", serve.kv_cache_dtype]
    if serve.enforce_eager:
        argv.append("--enforce-eager")
    if serve.reasoning_parser:
        argv += ["--reasoning-parser", serve.reasoning_parser]
    if serve.enable_auto_tool_choice:
        argv.append("--enable-auto-tool-choice")
    if serve.tool_call_parser:
        argv += ["--tool-call-parser", serve.tool_call_parser]
    args_start = len(argv)
    argv += serve.args or []
    args_span = (args_start, len(argv))
    if speculative is not None:
        config = speculative_config(speculative, draft_model=draft_model, draft_revision=draft_revision)
        argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    return ServeCommand(
        argv=tuple(argv),
        env=dict(serve.env or {}),
        served_model_name=artifact.repo,
        plugin=serve.plugin,
        startup_timeout=serve.startup_timeout or DEFAULT_STARTUP_TIMEOUT,
        speculative=speculative.id if speculative else "none",
        args_span=args_span,
    )
