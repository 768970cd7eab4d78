"""The carry to the GPU machine, rehearsed here on wheels the test makes (scripts/device/carry.py): pack -> parts
under the limit with SHA256SUMS -> reassemble, verify -> `pip install --dry-run --no-index` among the carried
wheels alone, and a real `--no-deps --target` install. No network: pip reads only the carried wheels."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import random
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.unit, pytest.mark.allow_subprocess]

BIG = "carrya/kernels/_big_kernel.so"


def _carry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_carry", ROOT / "scripts" / "device" / "carry.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_carry"] = module  # dataclass-free, but keep the module findable while it runs
    spec.loader.exec_module(module)
    return module


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def make_wheel(folder: Path, name: str, *, requires: tuple[str, ...] = (), extra: dict[str, bytes] | None = None
               ) -> Path:
    """A minimal valid pure-Python wheel `name-0.1-py3-none-any.whl` holding `name/__init__.py`."""
    dist = f"{name}-0.1.dist-info"
    files = {f"{name}/__init__.py": f"VALUE = {name!r}\n".encode(), **(extra or {})}
    files[f"{dist}/METADATA"] = ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: 0.1\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(_record_line(path, data) for path, data in files.items()) + f"{dist}/RECORD,,\n"
    wheel = folder / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as out:
        for path, data in files.items():
            out.writestr(path, data)
        out.writestr(f"{dist}/RECORD", record)
    return wheel


@pytest.fixture
def packed(tmp_path: Path) -> tuple[ModuleType, Path]:
    carry = _carry()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # Incompressible bytes, so the stream spans several parts of 16 KiB.
    big = random.Random(30).randbytes(64 * 1024)  # noqa: S311  test data, not a secret
    make_wheel(wheels, "carrya", requires=("carryb",), extra={BIG: big, "carrya/data.bin": big[:40000]})
    make_wheel(wheels, "carryb")
    lean = tmp_path / "lean.txt"
    lean.write_text("# dropped on the far side\ncarrya-*.whl  carrya/kernels/*\n", encoding="utf-8")
    manifest = carry.pack(wheels, tmp_path / "carry", part_mib=16 / 1024, lean=lean, level=1)
    assert len(manifest["parts"]) >= 2, "the rehearsal must cross a part boundary"
    return carry, tmp_path / "carry"


def test_parts_stay_under_the_limit_and_are_summed(packed: tuple[ModuleType, Path]) -> None:
    carry, out = packed
    parts = sorted(out.glob("part-*"))
    assert parts and all(p.stat().st_size <= 16 * 1024 for p in parts)
    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert {line.split("  ")[1] for line in sums} == {p.name for p in parts} | {"carry.tar.xz"}
    calls = carry.plan(out, relative_to=out.parent)
    assert calls[0][:2] == ["carry/SHA256SUMS", "carry/carry.json"] and len(calls) == len(parts)


def test_reassembled_wheels_resolve_among_themselves(packed: tuple[ModuleType, Path]) -> None:
    _, out = packed
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "device" / "carry.py"), "install", str(out), "--dry-run",
         "--require", "carrya"],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Would install carrya-0.1 carryb-0.1" in done.stdout


def test_install_target_without_the_dropped_members(packed: tuple[ModuleType, Path], tmp_path: Path) -> None:
    carry, out = packed
    target = tmp_path / "site"
    assert carry.install(out, target) == 0
    assert (target / "carrya" / "__init__.py").read_text() == "VALUE = 'carrya'\n"
    assert (target / "carryb" / "__init__.py").is_file()
    assert (target / "carrya" / "data.bin").stat().st_size == 40000
    assert not (target / BIG).exists()
    record = (target / "carrya-0.1.dist-info" / "RECORD").read_text()
    assert BIG not in record and "carrya/data.bin" in record


def test_a_changed_or_missing_part_is_refused(packed: tuple[ModuleType, Path], tmp_path: Path) -> None:
    carry, out = packed
    part = out / "part-001"
    data = bytearray(part.read_bytes())
    data[10] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(carry.CarryError, match="part-001 does not match SHA256SUMS"):
        carry.unpack(out, tmp_path / "w")
    part.unlink()
    with pytest.raises(carry.CarryError, match="part-001 is missing"):
        carry.unpack(out, tmp_path / "w")


def test_resplit_cuts_the_same_stream_into_smaller_parts(packed: tuple[ModuleType, Path], tmp_path: Path) -> None:
    """The working tree that travels with each call grew (issue 30's second run): the parts are cut again at a
    smaller size without compressing again, and still install; a wrong part stops it before anything is cut."""
    carry, out = packed
    before = len(carry.verify_parts(out))
    parts = carry.resplit(out, 8 / 1024)
    assert len(parts) > before and all(p.stat().st_size <= 8 * 1024 for p in parts)
    assert sorted(p.name for p in out.glob("part-*")) == [p.name for p in parts]
    assert carry.install(out, tmp_path / "site") == 0
    assert (tmp_path / "site" / "carryb" / "__init__.py").is_file()
    (out / "SHA256SUMS").write_text((out / "SHA256SUMS").read_text().replace(parts[0].name, "part-999"))
    with pytest.raises(carry.CarryError, match="part-000 does not match SHA256SUMS"):
        carry.resplit(out, 4 / 1024)
    assert sorted(p.name for p in out.glob("part-*")) == [p.name for p in parts]


def test_two_versions_of_one_distribution_are_refused(tmp_path: Path) -> None:
    carry = _carry()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "carryb")
    (wheels / "carryb-0.2-py3-none-any.whl").write_bytes((wheels / "carryb-0.1-py3-none-any.whl").read_bytes())
    with pytest.raises(SystemExit, match="two versions"):
        carry.pack(wheels, tmp_path / "carry", part_mib=1)
