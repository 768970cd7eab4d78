"""What every stage shares: the exit policy, and SIGTERM unwinding like Ctrl-C."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

from hfrelease.errors import EnvironmentProblem, ExitCode, HfreleaseError
from hfrelease.verdicts import severity


def run_stamp() -> str:
    """A run directory's time stamp (UTC, sortable)."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


# When several measurements ran (gates and speed anchors), the exit status is the most serious one: the one
# order of `hfrelease.verdicts.severity` (a dead server, then a void measurement, then a failed gate).
worst = severity.worst


class StageReport(Protocol):
    """What a stage returns: its `--json` document and the exit status it decides."""

    @property
    def exit_code(self) -> ExitCode: ...

    def as_dict(self) -> dict[str, object]: ...


def exit_status(report: StageReport) -> int:
    """The exit policy: the process exit status of a stage's report."""
    return int(report.exit_code)


@contextlib.contextmanager
def stage_signals() -> Iterator[None]:
    """While the block runs, SIGTERM (CI cancelling a job) unwinds like Ctrl-C: servers are stopped, what
    was recorded is kept. Outside the main thread (where Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def failure_of(exc: Exception, *, debug_variable: str) -> tuple[str, str | None, ExitCode]:
    """What a command that raised `exc` says and how it exits: an `HfreleaseError` as itself; a Hub request
    no command wrapped (a read in `verify`, a download in `eval`) as the Hub's failure, exit 7; a full or
    read-only disk as the machine's problem, exit 9; anything else as a bug in hfrelease, exit 1."""
    from hfrelease.hub_errors import hub_failure

    failure = exc if isinstance(exc, HfreleaseError) else hub_failure(exc) or disk_failure(exc)
    if failure is not None:
        return failure.message, failure.hint, failure.exit_code
    return (f"internal error: {type(exc).__name__}: {exc}",
            f"This is a bug in hfrelease. Re-run with {debug_variable}=1 for the traceback and report it.",
            ExitCode.INTERNAL)


# Write failures that are the machine's, not hfrelease's: any write may meet them, so they are classified once
# here rather than at each write. Every write hfrelease makes is atomic (`hfrelease.files.atomic`) or appends whole
# records, so what was written before the failure is intact.
_DISK_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exhausted",
                errno.EROFS: "the file system is read-only"}


def disk_failure(exc: BaseException) -> HfreleaseError | None:
    """A full, over-quota or read-only disk met anywhere in `exc`'s chain, as an EnvironmentProblem (exit 9)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_ERRNOS:
            where = f" writing {current.filename}" if current.filename else ""
            return EnvironmentProblem(
                f"{_DISK_ERRNOS[current.errno]}{where}",
                hint="Free space (or point HFRELEASE_CACHE / the output at another disk) and run the command "
                "again: what was written before is kept, and finished results are not measured again.",
            )
        current = current.__cause__ or current.__context__
    return None
