"""Reading why a vLLM server died from the last lines of its log."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfrelease.serving.diagnosis import diagnose, read_tail

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
        ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
         "out of memory"),
        ("vllm serve: error: unrecognized arguments: --frobnicate", "bad argument"),
        ("vllm serve: error: argument --dtype: invalid choice: 'float7'", "bad argument"),
        ("ValueError: Model architectures ['HfreleaseDemoForCausalLM'] are not supported for now.", "missing plugin"),
        ("OSError: /nope does not appear to have a file named config.json.", "model not found"),
        ("Value error, Invalid repository ID or local directory specified: '/tmp/empty-model'.", "model not found"),
        ("OSError: [Errno 98] Address already in use", "port in use"),
    ],
)
def test_causes(line: str, cause: str) -> None:
    """Each known failure line maps to its cause, with advice."""
    found = diagnose(["INFO starting", line, "Traceback follows"])
    assert found.cause == cause
    assert found.advice
    assert found.evidence == line


def test_signal_without_log_evidence() -> None:
    """A SIGKILLed server with nothing in its log is reported as killed (often the OOM killer)."""
    assert diagnose(["INFO fine"], exit_code=-9).cause == "killed (SIGKILL)"
    assert diagnose(["INFO fine"], exit_code=1).cause == "unknown"


def test_read_tail(tmp_path: Path) -> None:
    """read_tail returns the last lines of a long log, and nothing for a missing one."""
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    assert read_tail(log, lines=3) == ["line 9997", "line 9998", "line 9999"]
    assert read_tail(tmp_path / "missing.log") == []
