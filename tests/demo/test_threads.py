"""The demo build's training threads: one by default, the variable's positive integer when set."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hfrelease.demo.threads import DEFAULT_THREADS, training_threads


@pytest.mark.unit
@pytest.mark.parametrize(("override", "expected"), [(None, DEFAULT_THREADS), ("", DEFAULT_THREADS), ("2", 2),
                                                    ("0", DEFAULT_THREADS), ("-3", DEFAULT_THREADS),
                                                    ("many", DEFAULT_THREADS)])
def test_thread_count(override: str | None, expected: int) -> None:
    assert training_threads(override) == expected


def test_applied_before_torch_loads_it_waits_passively() -> None:
    """In a fresh process (torch not imported yet) the wait policy is set before torch loads OpenMP, and
    torch trains on the chosen count; a policy the caller chose is kept."""
    code = ("import os; from hfrelease.demo.threads import apply_training_threads; n = apply_training_threads(); "
            "import torch; print(n, torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**_env(), "HFRELEASE_TRAIN_THREADS": "2"})
    assert out.stdout.split() == ["2", "2", "PASSIVE"]
    kept = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                          env={**_env(), "OMP_WAIT_POLICY": "ACTIVE"})
    assert kept.stdout.split() == ["1", "1", "ACTIVE"]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "HFRELEASE_TRAIN_THREADS")}
