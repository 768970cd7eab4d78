"""Secret redaction: one place that decides what a credential looks like and hides it.

Everything hfrelease prints, logs or records goes through `redact` (error messages, ledger records'
environment and serve commands, subprocess echoes), so a token pasted into the wrong field, or present in
the environment, never shows up in output, logs, cards or uploads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

REDACTED = "***"

# Shapes of well-known credentials: Hugging Face user/org tokens, GitHub tokens, OpenAI-style keys,
# bearer headers. Matching by shape catches a token that reached a string through any path.
_TOKEN_SHAPES = re.compile(
    r"(hf_[A-Za-z0-9]{16,}|api_org_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{12,})"
)
# For refusing (not hiding) a value, case does not matter: "HF_..." pasted from a shouted note is a token too;
# a short "hf_..." prefix is enough to refuse a manifest value, never to redact text.
_TOKEN_SHAPES_ANY_CASE = re.compile(
    r"(hf_[A-Za-z0-9]{16,}|api_org_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_|sk-[A-Za-z0-9_-]{16,}"
    r"|bearer\s+\S{8,})", re.I
)
# Environment variables whose values are secrets whatever they look like. Matched as whole words of the
# name (HF_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY) so that TOKENIZERS_PARALLELISM or MAX_TOKENS,
# which are settings worth recording, are not hidden.
SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|API_?KEY|PRIVATE_KEY|ACCESS_KEY|AUTH)(_|$)", re.I
)


# Secrets that reached hfrelease other than through the environment (a token read from huggingface_hub's
# token file, or exchanged via OIDC in CI): once registered, every `redact` call hides them too.
_REGISTERED: set[str] = set()


def register_secret(value: str) -> None:
    """Hide `value` in everything `redact` processes from now on (for secrets not held in os.environ)."""
    if len(value) >= 6:
        _REGISTERED.add(value)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-named variables in `env` (default: os.environ), longest first."""
    source = os.environ if env is None else env
    values = {v for k, v in source.items() if SECRET_NAME.search(k) and len(v) >= 6}
    return sorted(values, key=len, reverse=True)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every token-shaped string, secret environment value and `extra` value replaced."""
    for value in [*extra, *sorted(_REGISTERED, key=len, reverse=True), *secret_values()]:
        if value:
            text = text.replace(value, REDACTED)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def token_shaped(text: str) -> bool:
    """Whether `text` holds something shaped like a credential (any letter case: HF_..., Bearer, SK-...)."""
    return bool(_TOKEN_SHAPES_ANY_CASE.search(text))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with secret-named variables' values replaced (the names stay: they are useful)."""
    return {k: (REDACTED if SECRET_NAME.search(k) else redact(v)) for k, v in env.items()}


def public_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: os.environ) for a process that must hold no credential (a gate, a plugin's build).

    Secret-named variables are left out, and a secret inside any other value (a token-shaped string, a
    registered secret, a secret-named variable's value) is replaced as `redact` does."""
    source = os.environ if env is None else env
    extra = secret_values(source)
    return {k: redact(v, extra) for k, v in source.items() if not SECRET_NAME.search(k)}


def _environment_block(stat: str) -> tuple[int, int]:
    """The start and end address of the process's initial environment strings, from /proc/self/stat."""
    # Fields after the command name (which may hold spaces and parentheses) start at field 3; env_start
    # and env_end are fields 50 and 51 (proc(5)).
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[50 - 3]), int(fields[51 - 3])


def holding_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """Names of the variables of `env` (default: os.environ) that `public_environment` leaves out or redacts."""
    source = os.environ if env is None else env
    public = public_environment(source)
    return [name for name, value in source.items() if public.get(name) != value]


def seal_environment(proc: str = "/proc/self", *, names: Collection[str] | None = None) -> list[str]:
    """Keep this process's secret-named variables (or those in `names`) out of every other process's reach;
    returns their names.

    A child started without the secrets in its environment can still read the parent's from
    `/proc/<ppid>/environ` (same user: no privilege needed), which shows the environment the parent was
    *started* with, whatever the parent later removed. So, before third-party code runs (a plugin's build
    backend), the secrets are removed from the C environment (children no longer inherit them) and their
    bytes in that initial block are overwritten with NULs through /proc/self/mem (`/proc/<pid>/environ`
    no longer shows them). Python's `os.environ` keeps the values: code in this process (huggingface_hub's
    token lookup) still finds them, and a child gets one only when it is handed one explicitly.
    Linux only; elsewhere (or without /proc) only the C environment is cleared.
    """
    chosen = None if names is None else frozenset(names)

    def sealed(name: str) -> bool:
        return bool(SECRET_NAME.search(name)) if chosen is None else name in chosen

    found = [name for name in os.environ if sealed(name)]
    for name in found:
        os.unsetenv(name)  # C `environ` only: os.environ (the dict) keeps the value for this process
    if not found:
        return found
    try:
        start, end = _environment_block(Path(proc, "stat").read_text(encoding="ascii", errors="replace"))
        with Path(proc, "mem").open("r+b", buffering=0) as memory:
            memory.seek(start)
            block = memory.read(end - start)
            offset = 0
            for entry in block.split(b"\0"):
                key, sep, value = entry.partition(b"=")
                if sep and value and sealed(key.decode("utf-8", "replace")):
                    memory.seek(start + offset + len(key) + 1)
                    memory.write(b"\0" * len(value))
                offset += len(entry) + 1
    except (OSError, ValueError, IndexError):
        pass  # no /proc (not Linux) or no write access to our own memory: the C environment is still clear
    return found
