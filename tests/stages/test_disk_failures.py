"""A full or read-only disk is the machine's problem (exit 9, what to do), never "internal error" exit 1.

The full disk is real: a write to /dev/full fails with ENOSPC as a full file system does. A read-only file
system cannot be mounted here without privileges, so its OSError is built as the kernel reports it.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode, PublishError
from hfrelease.stages.runner import failure_of


def _full_disk_error() -> OSError:
    with pytest.raises(OSError) as raised, open("/dev/full", "w") as handle:  # noqa: PTH123 - a device
        handle.write("x" * 65536)
        handle.flush()
    return raised.value


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_exits_9_with_what_to_do() -> None:
    error = _full_disk_error()
    assert error.errno == errno.ENOSPC
    message, hint, code = failure_of(error, debug_variable="HFRELEASE_DEBUG")
    assert code == ExitCode.ENVIRONMENT
    assert message.startswith("no space left on the device")
    assert hint is not None and "kept" in hint


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_behind_another_error_is_found_in_its_chain() -> None:
    try:
        try:
            raise _full_disk_error()
        except OSError as inner:
            raise RuntimeError("while writing the ledger") from inner
    except RuntimeError as outer:
        _, _, code = failure_of(outer, debug_variable="HFRELEASE_DEBUG")
    assert code == ExitCode.ENVIRONMENT


def test_a_read_only_file_system_names_the_file(tmp_path: Path) -> None:
    error = OSError(errno.EROFS, "Read-only file system", str(tmp_path / "ledger" / "x.json"))
    message, _, code = failure_of(error, debug_variable="HFRELEASE_DEBUG")
    assert code == ExitCode.ENVIRONMENT and message == f"the file system is read-only writing {error.filename}"


def test_other_os_errors_stay_bugs_and_hfrelease_errors_keep_their_code() -> None:
    assert failure_of(OSError(errno.EACCES, "denied"), debug_variable="X")[2] == ExitCode.INTERNAL
    assert failure_of(PublishError("Hub said no"), debug_variable="X")[2] == ExitCode.PUBLISH_FAILED
