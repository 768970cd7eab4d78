#!/usr/bin/env python3
"""Carry a set of Python wheels to a machine that has no network, through calls that each take at most N MiB.

The lent GPU machine (nvidia-h200) reaches no package index: packages travel as files carried with each call,
at most 64 MiB a call with the working tree, and carried paths stay there only while the machine is warm. So a
wheel set of a few hundred MB is packed here into one xz stream cut into parts under the limit, the parts are
carried one call after the other, and the last call reassembles, verifies and installs them there.

Steps (stdlib only: the far side runs it with the image's python3 before anything is installed):

  wheels   pip download --no-deps the exact versions a list names (scripts/device/vllm-0.26.0-cu130.txt), for
           CPython 3.12 on manylinux x86-64; the few that PyPI has only as sdists are built into wheels here.
  pack     each wheel rewritten uncompressed (ZIP_STORED: xz then sees the raw bytes; deflated bytes barely
           compress), less the files a lean list drops (with their RECORD lines); all of them in one tar
           stream compressed with xz; the stream cut into parts of at most --part-mib; SHA256SUMS (each part,
           the whole stream) and carry.json (each wheel's sha256 and size) beside them.
  install  on the far side: each part checked against SHA256SUMS, the parts joined and decompressed as one
           stream, each wheel checked against carry.json, then
           `pip install --no-index --no-deps --no-compile --target DIR` (or `--dry-run`, resolving among the
           carried wheels only: the rehearsal tests/test_device_carry.py runs).
  resplit  the parts cut again at another --part-mib, without compressing again (the working tree that
           travels with each call grew: 24 MiB at the second H200 run, so 48 MiB parts no longer fitted).
  plan     which paths to carry in which call.

Where the list came from (scripts/device/README.md): `uv pip compile` of vllm==0.26.0, lm-eval[api]==0.4.13,
transformers 5.19, huggingface_hub 2.4 and hfrelease's dependencies for CPython 3.12 on manylinux_2_28 x86-64,
less what the device image already holds (its package list: /work/.library/device/KINDS.md) and less the
kernel packages a Hopper Llama served by vLLM does not import.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

MIB = 1024 * 1024
CHUNK = 4 * MIB
# pip download's tags for the device image's interpreter (CPython 3.12, glibc x86-64). pip matches manylinux_2_N
# exactly, hence the list.
PLATFORMS = ["any", "manylinux1_x86_64", "manylinux2014_x86_64"] + [
    f"manylinux_2_{n}_x86_64" for n in (5, 12, 17, 24, 26, 27, 28, 31, 34, 35)
]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def read_list(path: Path) -> list[str]:
    """Non-empty lines of a list file, comments (`#` to the end of the line) removed."""
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


# --- wheels -------------------------------------------------------------------------------------------------

def download(requirements: list[str], dest: Path, *, python_version: str = "3.12") -> None:
    """pip download --no-deps each requirement as a wheel for the device; sdist-only ones are built here."""
    dest.mkdir(parents=True, exist_ok=True)
    binary_args = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest),
                   "--python-version", python_version, "--implementation", "cp",
                   "--abi", "cp" + python_version.replace(".", ""), "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS:
        binary_args += ["--platform", platform]
    for requirement in requirements:
        done = subprocess.run([*binary_args, requirement], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            continue
        if "No matching distribution" not in done.stderr:
            sys.exit(f"pip download {requirement} failed:\n{done.stderr}")
        # Only an sdist on PyPI (rouge-score, sqlitedict, word2number): a pure-Python wheel built here.
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dest), requirement], check=True)


# --- pack ---------------------------------------------------------------------------------------------------

def lean_rules(path: Path | None) -> list[tuple[str, str]]:
    """(wheel name glob, member glob) pairs: `vllm-0.26.0-*.whl  vllm/vllm-rs   # why`."""
    if path is None:
        return []
    rules = []
    for line in read_list(path):
        wheel_glob, member_glob = line.split()
        rules.append((wheel_glob, member_glob))
    return rules


def restore_wheel(source: Path, dest: Path, drop: list[str]) -> list[str]:
    """`source` rewritten uncompressed at `dest`, without the members matching `drop` (and their RECORD lines).
    Returns the members dropped."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as zout:
        dropped = [i.filename for i in zin.infolist() if any(fnmatch.fnmatchcase(i.filename, p) for p in drop)]
        gone = set(dropped)
        for info in zin.infolist():
            if info.filename in gone:
                continue
            data = zin.read(info)
            if gone and info.filename.endswith(".dist-info/RECORD"):
                data = "".join(line for line in data.decode("utf-8").splitlines(keepends=True)
                               if line.split(",", 1)[0] not in gone).encode("utf-8")
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.external_attr = info.external_attr
            out.compress_type = zipfile.ZIP_STORED
            zout.writestr(out, data)
    return dropped


def _xz(raw: Path, out: Path, level: int) -> None:
    """xz -T0 where the tool exists (threads: much faster here), else Python's lzma; both write .xz streams that
    Python's lzma reads on the far side."""
    if shutil.which("xz"):
        with out.open("wb") as handle:
            subprocess.run(["xz", "-T0", f"-{level}", "-c", str(raw)], stdout=handle, check=True)
        return
    with raw.open("rb") as src, lzma.open(out, "wb", preset=level) as dst:
        shutil.copyfileobj(src, dst, CHUNK)


def pack(wheels: Path, out: Path, *, part_mib: float, lean: Path | None = None, level: int = 6) -> dict[str, object]:
    """Pack every wheel in `wheels` into parts under `out` (emptied first); returns what carry.json says."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rules = lean_rules(lean)
    sources = sorted(wheels.glob("*.whl"))
    if not sources:
        sys.exit(f"no wheels in {wheels}")
    names = [s.name for s in sources]
    if len({n.split("-")[0].lower() for n in names}) != len(names):
        sys.exit("two versions of one distribution: pip --no-deps would install both")
    entries = []
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        stored_dir = Path(scratch)
        raw = stored_dir / "carry.tar"
        with tarfile.open(raw, "w", format=tarfile.PAX_FORMAT) as tar:
            for source in sources:
                drop = [member for wheel_glob, member in rules if fnmatch.fnmatchcase(source.name, wheel_glob)]
                stored = stored_dir / source.name
                dropped = restore_wheel(source, stored, drop)
                entries.append({"wheel": source.name, "sha256": sha256_file(stored), "size": stored.stat().st_size,
                                "dropped": dropped})
                info = tar.gettarinfo(str(stored), arcname=source.name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with stored.open("rb") as handle:
                    tar.addfile(info, handle)
                stored.unlink()
        stream = stored_dir / "carry.tar.xz"
        _xz(raw, stream, level)
        parts = split(stream, out, int(part_mib * MIB))
        manifest: dict[str, object] = {
            "stream": {"sha256": sha256_file(stream), "size": stream.stat().st_size, "tar_size": raw.stat().st_size},
            "parts": [p.name for p in parts],
            "wheels": entries,
        }
    sums = [f"{sha256_file(p)}  {p.name}" for p in parts]
    sums.append(f"{manifest['stream']['sha256']}  carry.tar.xz")  # type: ignore[index]
    (out / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    (out / "carry.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def split(stream: Path, out: Path, part_bytes: int) -> list[Path]:
    """`stream` cut into out/part-000, part-001, ... of at most `part_bytes` each."""
    parts = []
    with stream.open("rb") as src:
        index = 0
        while True:
            part = out / f"part-{index:03d}"
            written = 0
            with part.open("wb") as dst:
                while written < part_bytes:
                    block = src.read(min(CHUNK, part_bytes - written))
                    if not block:
                        break
                    dst.write(block)
                    written += len(block)
            if written == 0:
                part.unlink()
                break
            parts.append(part)
            index += 1
    return parts


# --- install (far side) -------------------------------------------------------------------------------------

class CarryError(Exception):
    """The parts are missing, corrupt or do not make up the stream carry.json describes."""


def verify_parts(carry: Path) -> list[Path]:
    """The parts listed in carry.json, each checked against SHA256SUMS (a missing or changed part raises)."""
    manifest = json.loads((carry / "carry.json").read_text(encoding="utf-8"))
    sums = dict(reversed(line.split("  ", 1)) for line in (carry / "SHA256SUMS").read_text().splitlines() if line)
    parts = []
    for name in manifest["parts"]:
        part = carry / name
        if not part.is_file():
            raise CarryError(f"{name} is missing from {carry}: carry it (see `plan`)")
        if sha256_file(part) != sums.get(name):
            raise CarryError(f"{name} does not match SHA256SUMS: carry it again")
        parts.append(part)
    return parts


class _Joined(io.RawIOBase):
    """The parts read one after the other as one stream, hashed as they are read."""

    def __init__(self, parts: Iterable[Path]) -> None:
        self._parts: Iterator[Path] = iter(parts)
        self._current: io.BufferedReader | None = None
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while True:
            if self._current is None:
                nxt = next(self._parts, None)
                if nxt is None:
                    return 0
                self._current = nxt.open("rb")
            count = self._current.readinto(buffer)
            if count:
                self.digest.update(memoryview(buffer)[:count])
                return count
            self._current.close()
            self._current = None


def unpack(carry: Path, wheels: Path) -> list[Path]:
    """Verify, join and decompress the parts into `wheels`; each wheel checked against carry.json."""
    manifest = json.loads((carry / "carry.json").read_text(encoding="utf-8"))
    joined = _Joined(verify_parts(carry))
    wheels.mkdir(parents=True, exist_ok=True)
    with lzma.open(io.BufferedReader(joined, CHUNK), "rb") as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or "/" in member.name or not member.name.endswith(".whl"):
                raise CarryError(f"unexpected member {member.name!r} in the stream")
            source = tar.extractfile(member)
            assert source is not None
            with (wheels / member.name).open("wb") as dst:
                shutil.copyfileobj(source, dst, CHUNK)
    if joined.digest.hexdigest() != manifest["stream"]["sha256"]:
        raise CarryError("the joined parts do not match the stream's sha256")
    out = []
    for entry in manifest["wheels"]:
        wheel = wheels / entry["wheel"]
        if not wheel.is_file() or sha256_file(wheel) != entry["sha256"]:
            raise CarryError(f"{entry['wheel']} is missing or corrupt after unpacking")
        out.append(wheel)
    return out


def install(carry: Path, target: Path | None, *, dry_run: bool = False, requirements: list[str] | None = None,
            wheels: Path | None = None) -> int:
    """Unpack, then pip install the wheels --no-index: into `target` with --no-deps, or with --dry-run resolving
    `requirements` (default: every carried wheel) among the carried wheels alone."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = wheels or Path(scratch) / "wheels"
        carried = unpack(carry, folder)
        pip = [sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check"]
        if dry_run:
            wanted = requirements or [str(w) for w in carried]
            argv = [*pip, "--dry-run", "--ignore-installed", "--find-links", str(folder), *wanted]
        else:
            if target is None:
                raise CarryError("install needs --target (or --dry-run)")
            argv = [*pip, "--no-deps", "--no-compile", "--upgrade", "--target", str(target), *map(str, carried)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull  # no index or constraint file of the machine's pip.conf
        return subprocess.run(argv, env=env, check=False).returncode


# --- plan ---------------------------------------------------------------------------------------------------

def resplit(carry: Path, part_mib: float) -> list[Path]:
    """The stream of `carry`'s parts cut again into parts of at most `part_mib`; SHA256SUMS and carry.json
    rewritten to name them (the stream's own sha256 is checked first: a wrong part stops it)."""
    manifest = json.loads((carry / "carry.json").read_text(encoding="utf-8"))
    old_parts = verify_parts(carry)
    with tempfile.TemporaryDirectory(dir=carry) as scratch:
        stream = Path(scratch) / "carry.tar.xz"
        with stream.open("wb") as dst:
            for part in old_parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, dst, CHUNK)
        if sha256_file(stream) != manifest["stream"]["sha256"]:
            raise CarryError("the joined parts do not make up the stream carry.json names: carry them again")
        for part in old_parts:
            part.unlink()
        parts = split(stream, carry, int(part_mib * MIB))
    manifest["parts"] = [part.name for part in parts]
    sums = [f"{sha256_file(part)}  {part.name}" for part in parts]
    sums.append(f"{manifest['stream']['sha256']}  carry.tar.xz")
    (carry / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    (carry / "carry.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return parts


def plan(carry: Path, *, relative_to: Path) -> list[list[str]]:
    """The carry list of each call: the metadata with the first part, one part a call."""
    manifest = json.loads((carry / "carry.json").read_text(encoding="utf-8"))
    rel = os.path.relpath(carry, relative_to)
    calls = [[f"{rel}/{name}"] for name in manifest["parts"]]
    calls[0] = [f"{rel}/SHA256SUMS", f"{rel}/carry.json", *calls[0]]
    return calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wheels", help="pip download the list's wheels for the device")
    w.add_argument("list", type=Path)
    w.add_argument("--dest", type=Path, required=True)
    p = sub.add_parser("pack", help="wheels -> xz stream in parts with SHA256SUMS")
    p.add_argument("wheels", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part-mib", type=float, default=48.0)
    p.add_argument("--lean", type=Path, help="members to drop: `WHEEL-GLOB MEMBER-GLOB` a line")
    p.add_argument("--level", type=int, default=6)
    i = sub.add_parser("install", help="verify, reassemble and pip install the carried wheels (far side)")
    i.add_argument("carry", type=Path)
    i.add_argument("--target", type=Path)
    i.add_argument("--dry-run", action="store_true")
    i.add_argument("--wheels", type=Path, help="keep the unpacked wheels here")
    i.add_argument("--require", action="append", help="with --dry-run: what to resolve (default: every wheel)")
    r = sub.add_parser("resplit", help="cut the parts again at another size (no recompression)")
    r.add_argument("carry", type=Path)
    r.add_argument("--part-mib", type=float, required=True)
    q = sub.add_parser("plan", help="which paths to carry in which call")
    q.add_argument("carry", type=Path)
    q.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    try:
        if args.command == "wheels":
            download(read_list(args.list), args.dest)
        elif args.command == "pack":
            manifest = pack(args.wheels, args.out, part_mib=args.part_mib, lean=args.lean, level=args.level)
            stream = manifest["stream"]
            print(f"{len(manifest['wheels'])} wheels, tar {stream['tar_size'] / MIB:.1f} MiB -> xz "  # type: ignore[index]
                  f"{stream['size'] / MIB:.1f} MiB in {len(manifest['parts'])} parts")  # type: ignore[index,arg-type]
        elif args.command == "install":
            return install(args.carry, args.target, dry_run=args.dry_run, requirements=args.require,
                           wheels=args.wheels)
        elif args.command == "resplit":
            parts = resplit(args.carry, args.part_mib)
            print(f"{len(parts)} parts: " + ", ".join(f"{p.name} {p.stat().st_size / MIB:.1f} MiB" for p in parts))
        else:
            for n, paths in enumerate(plan(args.carry, relative_to=args.root), 1):
                print(f"call {n}: carry {json.dumps(paths)}")
    except CarryError as exc:
        print(f"carry: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
