"""The one subprocess wrapper: echo the command (redacted), capture output, replay stderr on failure."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hfrelease.errors import HfreleaseError
from hfrelease.redact import redact

Runner = Callable[..., subprocess.CompletedProcess[str]]


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    echo: Callable[[str], None] | None = None,
    error: type[HfreleaseError] = HfreleaseError,
    what: str | None = None,
    hint: str | None = None,
    runner: Runner = subprocess.run,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to completion; on a non-zero exit raise `error` with the last lines of its output."""
    display = redact(shlex.join(argv))
    if echo:
        echo(f"$ {display}")
    try:
        result = runner(
            list(argv), env=dict(env) if env is not None else None, cwd=cwd, capture_output=True, text=True,
            timeout=timeout, check=False, stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise error(f"{what or argv[0]}: command not found: {argv[0]}", hint=hint) from None
    except subprocess.TimeoutExpired:
        raise error(f"{what or display} did not finish within {timeout:g} s", hint=hint) from None
    if result.returncode != 0:
        tail = (result.stderr or result.stdout or "").strip().splitlines()[-20:]
        lines = "\n".join(f"    | {redact(line)}" for line in tail)
        raise error(f"{what or display} failed with exit code {result.returncode}:\n{lines}", hint=hint)
    return result
