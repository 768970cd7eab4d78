"""Which vLLM kernel library a server's processes loaded, read from /proc (a planted tree, and a real one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hfrelease.serving.kernels import group_pids, loaded_kernels, served_kernels

SITE = "/srv/venv/lib/python3.11/site-packages"


def _process(proc: Path, pid: int, *, pgid: int, comm: str, maps: str) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) S 1 {pgid} {pgid} 0 -1 4194560 0 0\n")
    (proc / str(pid) / "maps").write_text(maps)


@pytest.mark.unit
def test_the_engine_process_of_the_group_names_the_library(tmp_path: Path) -> None:
    """The API server maps nothing; its engine (same group, a comm with spaces and parentheses) maps
    _C_AVX2; another group's _C is not this server's."""
    _process(tmp_path, 100, pgid=100, comm="vllm", maps=f"7f00-7f01 r-xp 0 08:01 1 {SITE}/torch/lib/libc10.so\n")
    _process(tmp_path, 101, pgid=100, comm="VLLM::Engine (core) 0", maps=(
        f"7f00-7f01 r-xp 0 08:01 2 {SITE}/vllm/_C_AVX2.abi3.so\n"
        f"7f02-7f03 r--p 0 08:01 2 {SITE}/vllm/_C_AVX2.abi3.so\n"
        f"7f04-7f05 r-xp 0 08:01 3 {SITE}/vllm/_moe_C.abi3.so\n"))
    _process(tmp_path, 200, pgid=200, comm="other", maps=f"7f00-7f01 r-xp 0 08:01 4 {SITE}/vllm/_C.abi3.so\n")
    (tmp_path / "self").mkdir()  # not a pid: skipped
    assert group_pids(100, tmp_path) == [100, 101]
    assert loaded_kernels(100, tmp_path) == ["_C_AVX2"]
    assert served_kernels(100, tmp_path) == {"vllm_kernels": ["_C_AVX2"], "served_isa": "avx2"}
    assert served_kernels(200, tmp_path) == {"vllm_kernels": ["_C"], "served_isa": "avx512_bf16"}


@pytest.mark.unit
def test_a_group_without_kernels_records_nothing(tmp_path: Path) -> None:
    """A GPU build (or a server still importing) maps no CPU kernel library: no field, never a guess."""
    _process(tmp_path, 300, pgid=300, comm="vllm", maps="")
    assert served_kernels(300, tmp_path) == {}
    assert served_kernels(999, tmp_path) == {}


def test_a_real_process_group_is_found() -> None:
    """On this machine's /proc: a child started in its own session is its own group, found by its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert group_pids(child.pid) == [child.pid]
        assert loaded_kernels(child.pid) == []
    finally:
        child.kill()
        child.wait()
