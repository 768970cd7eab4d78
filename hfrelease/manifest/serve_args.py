"""Spelling-level checks of `vllm serve` arguments and environment in a manifest (no vLLM needed).

These run on every manifest load, on any machine: a GitHub-hosted runner with only hfrelease installed
checks a manifest too. They are deliberately conservative: vLLM's parser is argparse, which accepts any
unambiguous prefix of an option (`--trust-remote` is `--trust-remote-code`, `--hos 0.0.0.0` sets the host),
`_` for `-` (`--trust_remote_code`), `--opt=value`, dotted JSON keys (`--speculative-config.model x`) and
`--config FILE`, so an argument is refused whenever its option name, spelt any of those ways, could be an
option hfrelease owns. Where vLLM is installed, `hfrelease.serving.guard` then parses the exact command
with vLLM's own parser and inspects the resulting namespace, which is the authority.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hfrelease.redact import token_shaped

# vLLM's option -> why a manifest must not pass it in `args` (the manifest key to use instead).
OWNED_OPTIONS: Mapping[str, str] = {
    "--host": "hfrelease serves on 127.0.0.1 only",
    "--port": "hfrelease chooses a free port",
    "--uds": "hfrelease talks to the server over TCP on 127.0.0.1",
    "--trust-remote-code": "use trust_remote_code = true",
    "--no-trust-remote-code": "use trust_remote_code = false",
    "--config": "a config file hides arguments from the guard: put them in the manifest",
    "--api-key": "never pass credentials as arguments",
    "--hf-token": "never pass credentials as arguments",
    "--model": "the artifact's source names the model",
    "--served-model-name": "hfrelease serves each artifact under its repo id",
    "--speculative-config": "declare it in [[speculative]] and name it in a workload",
    "--spec-method": "declare it in [[speculative]] and name it in a workload",
    "--spec-model": "declare it in [[speculative]] and name it in a workload",
    "--spec-tokens": "declare it in [[speculative]] and name it in a workload",
    "--reasoning-parser": "use reasoning_parser",
    "--tool-call-parser": "use tool_call_parser",
    "--max-model-len": "use max_model_len",
    "--kv-cache-dtype": "use kv_cache_dtype",
    "--headless": "hfrelease needs the API server",
}
# Single-dash aliases of owned options in vLLM 0.32 (-sc is --speculative-config; -h prints help and exits).
OWNED_SHORT: Mapping[str, str] = {
    "-sc": OWNED_OPTIONS["--speculative-config"],
    "-h": "help exits instead of serving",
}

# Words of an environment variable's name that mean it holds a credential. Wider than what redaction hides
# (which must keep settings such as MAX_TOKENS visible in records): a manifest has no business holding any
# of these, so OPENAI_KEY, hf_tok or DB_PASS are refused too.
_SECRET_WORDS = frozenset({
    "KEY", "KEYS", "APIKEY", "TOK", "SECRET", "SECRETS", "PASS", "PASSWD", "PASSWORD", "PWD",
    "CRED", "CREDS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT", "BEARER", "COOKIE",
})
# TOKEN only at the end of the name: vLLM has settings such as VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE and
# VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD, while HF_TOKEN, GITHUB_TOKEN and HFTOKEN end with it.
_SECRET_INFIX = re.compile(r"SECRET|PASSW|APIKEY|ACCESSKEY|CREDENTIAL|TOKEN$|_KEY$|^KEY_", re.I)
# vLLM settings whose names contain a secret-looking word but hold none (kept working).
_NOT_SECRET = frozenset({"TOKENIZERS_PARALLELISM", "VLLM_CPU_KVCACHE_SPACE"})


def option_name(arg: str) -> str | None:
    """The option an argument names as vLLM's parser normalises it (`--Trust_remote=1` -> `--trust-remote`),
    or None for a value."""
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0].split(".", 1)[0]
        return "--" + name.replace("_", "-")
    if arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit():
        return "-" + arg[1:].split("=", 1)[0]
    return None


def args_problems(args: Sequence[str]) -> list[str]:
    """Why some of `args` may not be passed to `vllm serve` from a manifest (empty when none)."""
    problems: list[str] = []
    for arg in args:
        name = option_name(arg)
        if name is None:
            continue
        if name == "--":
            problems.append("a bare '--' ends the options: vLLM would read what follows differently")
            continue
        if name.startswith("--"):
            # argparse takes any unambiguous prefix: '--hos' is '--host'.
            hits = [opt for opt in OWNED_OPTIONS if opt.startswith(name)]
        else:
            hits = [opt for opt in OWNED_SHORT if opt.startswith(name) or name.startswith(opt)]
        if hits:
            owned = hits[0]
            written = arg.split("=", 1)[0]
            spelt = "" if written == owned else f" (vLLM reads {written!r} as {owned})"
            reason = OWNED_OPTIONS.get(owned) or OWNED_SHORT[owned]
            problems.append(f"args must not contain {owned}{spelt}: {reason}")
    return problems


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (case-insensitive)."""
    upper = name.upper()
    if upper in _NOT_SECRET:
        return False
    words = set(upper.split("_"))
    return bool(words & _SECRET_WORDS) or bool(_SECRET_INFIX.search(upper))


def env_problems(env: Mapping[str, str]) -> list[str]:
    """Why some of `env` may not be set from a manifest: credential-like names or token-shaped values."""
    problems: list[str] = []
    names = [k for k in env if secret_name(k)]
    if names:
        problems.append(
            f"{', '.join(names)} {'looks like a secret' if len(names) == 1 else 'look like secrets'}: "
            "never put credentials in the manifest; export them where hfrelease runs"
        )
    shaped = [k for k, v in env.items() if k not in names and token_shaped(v)]
    if shaped:
        problems.append(
            f"the value of {', '.join(shaped)} looks like a token: never put credentials in the manifest; "
            "export them where hfrelease runs"
        )
    return problems
