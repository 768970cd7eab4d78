"""How many threads the demo build trains with, and how they wait: a build that tolerates a busy machine.

torch's default is one OpenMP thread per core, and GNU OpenMP's threads spin while they wait for each
other. The demo's models are tiny (a training step is many small matmuls, each a short parallel region
ending in a barrier), so a second thread buys little, and when another process holds a core the thread
parked there stalls every barrier: on a loaded 2-core AMD EPYC host the reference's step 100 came at
345 s. Measured side by side (`benchmarks/build_load.py`, figures in BENCHMARKS.md), one thread trains
faster than two both alone and beside two CPU-bound processes, so the build trains on one thread, and
idle OpenMP threads sleep instead of spin (`OMP_WAIT_POLICY=PASSIVE`, read by the OpenMP runtime when
torch loads it: set only before torch is imported, and only when the caller chose no policy). A fixed
count also keeps a build's float reductions in one order whatever the machine's load.
`HFRELEASE_TRAIN_THREADS` overrides the count.
"""

from __future__ import annotations

import os
import sys

THREADS_VARIABLE = "HFRELEASE_TRAIN_THREADS"
DEFAULT_THREADS = 1


def training_threads(override: str | None = None) -> int:
    """The training thread count: `override` (the variable's value) when it is a positive integer, else 1."""
    try:
        wanted = int(override) if override else 0
    except ValueError:
        wanted = 0
    return wanted if wanted > 0 else DEFAULT_THREADS


def apply_training_threads() -> int:
    """Set torch's thread count (and, before torch loads, OpenMP's wait policy) for training; return it."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    threads = training_threads(os.environ.get(THREADS_VARIABLE))
    torch.set_num_threads(threads)
    return threads
