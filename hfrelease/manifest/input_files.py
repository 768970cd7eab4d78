"""Files a manifest names that hfrelease reads whole (the manifest itself, prompt sets, chat templates, a plugin's
pyproject.toml): read only when they are regular files of bounded size.

A fidelity prompt set that was /dev/zero, or a 2 GB sparse file, was read until memory ran out and ended in
exit 1 (MemoryError, "a bug"); a FIFO blocked `check` forever. Each file is opened without blocking and checked
with fstat (the file actually opened, not a name that could be swapped in between), and never more than its
limit + 1 bytes are read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hfrelease.errors import ConfigError, ConfigProblem

# A prompt set holds at most 10,000 prompts (gate_rules.MAX_PROMPTS): 64 MiB is 6 KiB a prompt, far above any
# real set and far below memory trouble. Chat templates, tokenizer configs and pyproject files are smaller still.
MAX_INPUT_BYTES = 64 << 20
# A speed workload's prompts may be a larger benchmark corpus (vLLM's bench reads it whole too).
MAX_WORKLOAD_BYTES = 256 << 20


class InputFileError(ValueError):
    """A file the manifest names cannot be read as one: not a regular file, too large, or unreadable."""


def read_bounded(path: Path, *, limit: int, what: str, expected: str, name: str | None = None) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes, else InputFileError at once.

    `what` and `expected` word the refusal (`a prompt set` is `a JSONL file`); `name` is how an unreadable file
    is named (default: its path). A missing file raises FileNotFoundError, for callers that say so their way.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputFileError(f"cannot read {name or path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a device, pipe or socket"
            raise InputFileError(f"not a regular file ({kind}): {what} is {expected}")
        if info.st_size > limit:
            raise InputFileError(f"{info.st_size} bytes: {what} is at most {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read
            raise InputFileError(f"more than {limit} bytes: {what} is at most {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise InputFileError(f"cannot read {name or path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def read_input_text(path: Path, *, what: str, expected: str, limit: int = MAX_INPUT_BYTES) -> str:
    """`read_bounded` decoded as UTF-8 (a decoding error is an InputFileError too)."""
    raw = read_bounded(path, limit=limit, what=what, expected=expected)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"not UTF-8 text (byte {exc.start}): {what} is {expected}") from None


def read_workload_prompts(path: Path) -> str:
    """A speed workload's prompts (JSONL) as text, bounded by MAX_WORKLOAD_BYTES; ConfigError (exit 3) when the
    file cannot be one (a device, a FIFO, a file larger than that, not UTF-8)."""
    try:
        return read_input_text(path, what="a workload's prompts", expected="a JSONL file",
                               limit=MAX_WORKLOAD_BYTES)
    except (FileNotFoundError, InputFileError) as exc:
        message = str(exc) if isinstance(exc, InputFileError) else "the workload's prompts do not exist"
        raise ConfigError(str(path), [ConfigProblem(location="", message=message)]) from None
