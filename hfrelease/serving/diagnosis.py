"""Why a vLLM server died or never became healthy, read from the last lines of its log.

vLLM's failures surface as Python tracebacks deep in engine processes; a user needs the one line that
says what to change. Each rule maps a log pattern (vllm 0.2x-0.3x wording) to a cause and advice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TAIL_LINES = 40


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    cause: str  # short: "out of memory", "bad argument", "missing plugin", ...
    advice: str
    evidence: str | None  # the log line that matched


_RULES: Sequence[tuple[str, re.Pattern[str], str]] = (
    (
        "out of memory",
        re.compile(
            r"(out of memory|OutOfMemoryError|Cannot allocate memory|No available memory for the cache blocks"
            r"|not enough (KV cache|memory)|insufficient memory|larger than the available KV cache memory"
            r"|MemoryError)",
            re.I,
        ),
        "lower --max-model-len or the KV cache size (VLLM_CPU_KVCACHE_SPACE on CPU, "
        "--gpu-memory-utilization on GPU), or serve on a larger device",
    ),
    (
        "missing plugin",
        re.compile(
            r"(Model architectures? \[?'?[\w.]+'?\]? (are|is) not supported|Cannot find model module"
            r"|is not supported for now|Failed to load plugin|No module named '?\w*plugin)",
            re.I,
        ),
        "the model's architecture is not in this vLLM: set [serve].plugin to the family's vllm_plugin/ "
        "(installed with pip install --no-deps before serving), or use a vLLM that includes it",
    ),
    (
        "bad argument",
        re.compile(r"(error: unrecognized arguments|error: argument|invalid choice|ValidationError|Invalid value"
                   r"|ValueError: .*(argument|config|not supported))", re.I),
        "a `vllm serve` argument or configuration value was refused: check [serve].args and the "
        "artifact's [serve] overrides against `vllm serve --help`",
    ),
    (
        "model not found",
        re.compile(
            r"(does not appear to have a file named|is not a local folder|Repo id must|RepositoryNotFound"
            r"|Invalid repository ID or local directory|ensure the presence of a 'config\.json'"
            r"|No such file or directory: .*config\.json|Can't load the configuration|couldn't connect to"
            r"|We couldn't connect|offline mode is enabled|HF_HUB_OFFLINE)",
            re.I,
        ),
        "the model files were not found: check the artifact's source path (or pinned Hub revision) and that "
        "it holds config.json and weights; nothing is downloaded while HF_HUB_OFFLINE=1",
    ),
    (
        "port in use",
        re.compile(r"(Address already in use|address in use)", re.I),
        "another process holds the port; hfrelease picks a free one, so retry",
    ),
)


def read_tail(log_path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a log (read from the end, so a huge log costs little)."""
    try:
        with log_path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def diagnose(tail: Sequence[str], *, exit_code: int | None = None) -> Diagnosis:
    """The most specific cause found in the log tail (later lines win: they are closer to the death)."""
    for line in reversed(tail):
        for cause, pattern, advice in _RULES:
            if pattern.search(line):
                return Diagnosis(cause=cause, advice=advice, evidence=line.strip()[:300])
    if exit_code is not None and exit_code < 0:
        signal_number = -exit_code
        if signal_number == 9:
            return Diagnosis(
                cause="killed (SIGKILL)",
                advice="the process was killed from outside, often by the kernel's out-of-memory killer",
                evidence=None,
            )
        return Diagnosis(cause=f"killed by signal {signal_number}", advice="see the server log", evidence=None)
    return Diagnosis(cause="unknown", advice="read the last lines of the server log below", evidence=None)
