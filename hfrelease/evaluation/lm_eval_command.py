"""An lm-eval run as data (`LmEvalCall`): the gate's model arguments and `simple_evaluate` arguments, built
once, passed to lm-eval's Python API and rendered as the `lm_eval` command line that does the same."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfrelease.evaluation.timeouts import MAX_RETRIES, gate_request_timeout
from hfrelease.manifest import Gate


def generation_kwargs(gate: Gate) -> dict[str, Any]:
    """The request settings every generation of the gate carries (thinking switch included)."""
    kwargs: dict[str, Any] = {"max_tokens": gate.max_tokens, "temperature": gate.temperature}
    if gate.top_p is not None:
        kwargs["top_p"] = gate.top_p
    if gate.api == "chat":
        kwargs["chat_template_kwargs"] = {"enable_thinking": gate.mode == "thinking"}
    return kwargs


# Flags of lm-eval's command line (lm-eval 0.4.13, `lm_eval/_cli/run.py` and `config/evaluate_config.py`) for the
# `simple_evaluate` arguments hfrelease sets; `LmEvalCall.argv` refuses any other, so every argument the
# Python call receives has a printed form.
_SEED_ARGUMENTS = ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")


@dataclass(frozen=True, kw_only=True)
class LmEvalCall:
    """One lm-eval run as data, built once: `run_lm_eval_gate` passes it to lm-eval's Python API and
    `argv` renders it as the `lm_eval` command line that does the same, so the two cannot drift.

    `model_args` are the model class's constructor arguments (`--model_args`, given as JSON so that every
    value keeps its type); lm-eval's command line also hands them to the task manager as metadata, and so
    does the Python call. `evaluate` holds the other `simple_evaluate` arguments.
    """

    model: str  # lm-eval's registry name of the model class
    model_args: Mapping[str, Any]
    tasks: tuple[str, ...]
    include_path: str | None
    evaluate: Mapping[str, Any]

    def argv(self, *, output_path: str, executable: str = "lm_eval") -> list[str]:
        """The `lm_eval` argv; `output_path` is where lm-eval's CLI writes results and samples (a file
        output only: the Python call keeps them in memory)."""
        argv = [executable, "--model", self.model, "--model_args", _json(self.model_args),
                "--tasks", ",".join(self.tasks)]  # fmt: skip
        if self.include_path is not None:
            argv += ["--include_path", self.include_path]
        options = dict(self.evaluate)
        seeds = [options.pop(name, None) for name in _SEED_ARGUMENTS]
        # `--seed N` sets all four generators; without it lm-eval seeds 0,1234,1234,1234.
        if any(seed is not None for seed in seeds):
            argv += ["--seed", str(seeds[0]) if len(set(seeds)) == 1 else ",".join(map(str, seeds))]
        chat = options.pop("apply_chat_template", False)
        if chat is True:
            argv.append("--apply_chat_template")
        elif chat:
            argv += ["--apply_chat_template", str(chat)]
        # lm-eval's CLI turns fewshot_as_multiturn on with a chat template and leaves it unset (None) without.
        multiturn = options.pop("fewshot_as_multiturn", None)
        if multiturn != (True if chat else None):
            argv += ["--fewshot_as_multiturn", str(bool(multiturn)).lower()]
        gen_kwargs = options.pop("gen_kwargs", None)
        if gen_kwargs:
            argv += ["--gen_kwargs", _json(gen_kwargs)]
        for name, flag in (("num_fewshot", "--num_fewshot"), ("limit", "--limit"),
                           ("system_instruction", "--system_instruction")):
            value = options.pop(name, None)
            if value is not None:
                argv += [flag, str(value)]
        if options.pop("log_samples", False):
            argv.append("--log_samples")
        if options:
            raise ValueError(f"no lm_eval flag for simple_evaluate argument(s) {sorted(options)}")
        return [*argv, "--output_path", output_path]

    def display(self, *, output_path: str, executable: str = "lm_eval") -> str:
        """The command line, quoted for a POSIX shell."""
        return shlex.join(self.argv(output_path=output_path, executable=executable))


def _json(value: Any) -> str:
    # JSON, not lm-eval's key=value form: that form splits on commas and re-types values ("1e5" becomes a
    # float, "None" None), JSON keeps each value as the Python call receives it. Upstream: a value holding a
    # comma is split (https://github.com/EleutherAI/lm-evaluation-harness/issues/1677).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def lm_eval_call(
    gate: Gate,
    *,
    base_url: str,
    model: str,
    task_dir: Path | None,
    tokenizer: str | None,
    tokenizer_revision: str | None = None,
    num_concurrent: int | None = None,
) -> LmEvalCall:
    """The lm-eval run of `gate` against the server at `base_url` serving `model`.

    `num_concurrent`: the requests it may keep in flight (default the gate's own); a gate running beside the
    artifact's others gets the artifact's whole budget, which the gates share (`hfrelease.evaluation.budget`).

    `tokenizer` (log-likelihood tasks need one) is a local tokenizer directory, so that nothing is fetched
    from the Hub, or, in a dry run of a Hub source not downloaded yet, its repo id at `tokenizer_revision`;
    None for chat gates, which send text and need none.
    """
    assert gate.task is not None
    model_args: dict[str, Any] = {
        "model": model,
        "num_concurrent": num_concurrent or gate.num_concurrent,
        "max_retries": MAX_RETRIES,
        "seed": gate.seed,
        "max_gen_toks": gate.max_tokens,
        # Per request (aiohttp's total timeout of each attempt), from the gate's budget.
        "timeout": math.ceil(gate_request_timeout(gate)),
    }
    if gate.api == "chat":
        # think_end_token: without a reasoning parser the answer follows </think> in `content`; lm-eval keeps
        # only what follows it (a thinking gate scored on its think block would fail every sample).
        model_args |= {"base_url": f"{base_url}/v1/chat/completions", "think_end_token": "</think>"}
    else:
        model_args |= {"base_url": f"{base_url}/v1/completions", "tokenized_requests": False}
    if tokenizer:
        model_args |= {"tokenizer": tokenizer, "tokenizer_backend": "huggingface"}
        if tokenizer_revision:
            model_args["revision"] = tokenizer_revision
    else:
        model_args["tokenizer_backend"] = None
    chat = gate.api == "chat"
    evaluate: dict[str, Any] = {
        "num_fewshot": gate.num_fewshot,
        "limit": gate.limit,
        "gen_kwargs": generation_kwargs(gate),
        "apply_chat_template": chat,
        "fewshot_as_multiturn": True if chat else None,  # what lm-eval's CLI passes
        "log_samples": True,
        **dict.fromkeys(_SEED_ARGUMENTS, gate.seed),
    }
    return LmEvalCall(
        model="local-chat-completions" if chat else "local-completions",
        model_args=model_args,
        tasks=(gate.task,),
        include_path=str(task_dir) if task_dir else None,
        evaluate=evaluate,
    )
