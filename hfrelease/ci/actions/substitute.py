"""The steps a rehearsal does not run as written, and what stands in for each (always named in the report).

- `actions/checkout`: in a git repository the workspace holds the tree of the commit the tag would be pushed
  on (HEAD), as checkout writes it: each blob as stored (so a Git LFS file is its pointer, checkout's default
  `lfs: false`), links as links, executables as executables; untracked files and uncommitted edits are not
  there. Outside git (no commit to push) a copy of the directory stands in: every file but `.git` and
  hfrelease's state (`.hfrelease/`, the rehearsal's work directory and Hub), and the report says so.
- `actions/setup-python`: this Python's environment is put first on PATH (its `python`, its `hfrelease`).
- `actions/setup-python`'s `python-version` must be a CPython setup-python can install
  (`python_versions.py`), else the step fails as it does on GitHub.
- a `run:` step that only installs with pip (into a virtual environment of the job's own: creating it and
  putting it on `GITHUB_PATH` count as part of the install): not run, but every `-r FILE` it names must be
  in the checked-out tree (pip fails on a missing requirements file), and the hfrelease it installs
  (`$HFRELEASE`) must resolve as `hfrelease check` judges it (`ci.install.step_install_problem`); the
  current environment stands in (a rehearsal must not reinstall hfrelease or install vLLM's CUDA build on a
  CPU machine).
- `actions/attest`: not run (no Sigstore, no GitHub attestations API here); its `bundle-path` output is
  empty, so the publish job ships no attestation.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from hfrelease.ci.actions.workflow import Step

_PIP_INSTALL = re.compile(r"^\s*(?:\"?\S*python[0-9.]*\"?\s+-m\s+)?pip[0-9.]*\s+install\b")
# What else an install step may do: make the job's virtual environment and put it first on PATH.
_ENV_SETUP = re.compile(r"^\s*(?:python[0-9.]*\s+-m\s+venv\s+\S+|echo\s+\S+\s*>>\s*\"?\$GITHUB_PATH\"?)\s*$")


def action_name(step: Step) -> str:
    """`actions/checkout` of `actions/checkout@<sha>`, lowercased as GitHub resolves it."""
    return (step.uses or "").split("@", 1)[0].lower()


def pip_only(script: str) -> bool | None:
    """True when every command of `script` is a pip install, None when only some are, False when none."""
    lines = [line for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    installs = [line for line in lines if _PIP_INSTALL.match(line)]
    if not installs:
        return False
    setup = [line for line in lines if _ENV_SETUP.match(line)]
    return True if len(installs) + len(setup) == len(lines) else None


_REQUIREMENT = re.compile(r"(?:^|\s)(?:-r|--requirement|-c|--constraint)(?:\s+|=)(\"[^\"]+\"|'[^']+'|\S+)")


def requirement_files(script: str) -> list[str]:
    """The `-r` / `-c` files the pip installs of `script` read, as written (quotes removed)."""
    return [m.group(1).strip("\"'") for line in script.splitlines() if _PIP_INSTALL.match(line)
            for m in _REQUIREMENT.finditer(line)]


def head_commit(source: Path) -> str | None:
    """The commit checked out at `source` (its HEAD), None outside a git repository or before a first commit."""
    if not (source / ".git").exists():
        return None
    found = subprocess.run(["git", "-C", str(source), "rev-parse", "--verify", "-q", "HEAD^{commit}"],
                           check=False, capture_output=True, text=True)
    return found.stdout.strip() or None


def uncommitted(source: Path) -> list[str]:
    """The paths whose content on disk differs from HEAD's (edits, deletions, untracked files)."""
    listed = subprocess.run(["git", "-C", str(source), "status", "--porcelain=v1", "-z", "--untracked-files=all"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    return sorted({entry[3:] for entry in listed if len(entry) > 3})


def export_commit(source: Path, commit: str, target: Path) -> int:
    """Write `commit`'s tree into `target` as stored (no filters: an LFS file stays its pointer); returns
    the number of files written. Submodules are left as empty directories, as checkout leaves them."""
    listed = subprocess.run(["git", "-C", str(source), "ls-tree", "-r", "-z", "--full-tree", commit],
                            capture_output=True, check=True).stdout.decode().split("\0")
    entries = []
    for entry in filter(None, listed):
        meta, _, path = entry.partition("\t")
        mode, kind, sha = meta.split()
        if kind == "commit":
            (target / path).mkdir(parents=True, exist_ok=True)
        else:
            entries.append((mode, sha, path))
    batch = subprocess.run(["git", "-C", str(source), "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"{sha}\n" for _, sha, _ in entries).encode()).stdout
    offset = 0
    for mode, _, path in entries:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        content = batch[header_end + 1:header_end + 1 + size]
        offset = header_end + 1 + size + 1
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            destination.symlink_to(content.decode())
        else:
            destination.write_bytes(content)
            if mode == "100755":
                destination.chmod(0o755)
    return len(entries)


def python_bin() -> Path:
    """The directory of this Python's executables (`python`, `hfrelease`): what setup-python would put on PATH."""
    return Path(sys.executable).parent


def environment_note() -> str:
    """One line naming the environment that stands in for the installs."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("hfrelease", "vllm", "lm_eval"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return f"the current environment stands in ({sys.prefix}: {', '.join(found)})"


def copy_work_tree(source: Path, target: Path, *, leave_out: Sequence[Path] = ()) -> int:
    """Copy the work tree at `source` into the empty directory `target`; returns the number of entries copied."""
    target.mkdir(parents=True, exist_ok=True)
    skip = {p.resolve() for p in leave_out}
    if (source / ".git").exists():
        listed = subprocess.run(
            ["git", "-C", str(source), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, check=True).stdout.decode().split("\0")
        count = 0
        for relative in sorted(set(filter(None, listed))):
            path = source / relative
            if not (path.exists() or path.is_symlink()) or any(path.resolve() == s or s in path.resolve().parents
                                                                 for s in skip if not path.is_symlink()):
                continue
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                destination.symlink_to(path.readlink())
            elif path.is_file():
                shutil.copy2(path, destination)
            count += 1
        return count

    copied = 0

    def ignore(directory: str, names: list[str]) -> list[str]:
        nonlocal copied
        here = Path(directory)
        left = [n for n in names
                if n in (".git", ".hfrelease") or ((here / n).resolve() in skip and not (here / n).is_symlink())]
        copied += len(names) - len(left)
        return left

    shutil.copytree(source, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
    return copied
