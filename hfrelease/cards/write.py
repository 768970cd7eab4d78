"""Writing rendered cards into `model_cards/<family>/<artifact-id>/`, and diffing against the last render.

The last render is what is on disk (rendered cards are committed), so `--diff` compares with it. Files
are written atomically; a plot, `.eval_results` or Every Eval Ever file the new render no longer makes is
removed, so a card directory never keeps an orphan the bundle would upload.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from hfrelease.cards.render import RenderedFamily
from hfrelease.files.atomic import write_atomic

GENERATED_DIRS = ("plots", ".eval_results", "every_eval_ever")


@dataclass(frozen=True, kw_only=True)
class FileChange:
    path: Path
    old: bytes | None  # None: a new file
    new: bytes | None  # None: removed

    @property
    def status(self) -> str:
        return "added" if self.old is None else "removed" if self.new is None else "changed"


def plan_changes(rendered: RenderedFamily, family_root: Path) -> list[FileChange]:
    """What writing `rendered` under `family_root` would change (unchanged files are left out)."""
    changes: list[FileChange] = []
    for card in rendered.cards:
        directory = family_root / card.artifact_id
        for name, content in sorted(card.files.items()):
            path = directory / name
            old = path.read_bytes() if path.is_file() else None
            if old != content:
                changes.append(FileChange(path=path, old=old, new=content))
        for generated in GENERATED_DIRS:
            folder = directory / generated
            if not folder.is_dir():
                continue
            # every_eval_ever/ nests its records (data/{gate}/{owner}/{model}/): every level is looked at.
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.relative_to(directory).as_posix() not in card.files:
                    changes.append(FileChange(path=path, old=path.read_bytes(), new=None))
    return changes


def apply_changes(changes: list[FileChange]) -> None:
    for change in changes:
        if change.new is None:
            change.path.unlink()
            # A record's folder left empty (the gate gone, its owner renamed) goes too, up to every_eval_ever/.
            parent = change.path.parent
            while parent.name != GENERATED_DIRS[-1] and parent.parent != parent and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        else:
            write_atomic(change.path, change.new)


def unified_diff(changes: list[FileChange], family_root: Path) -> str:
    """A unified diff of text files and one line per binary file (plots)."""
    parts: list[str] = []
    for change in changes:
        name = change.path.relative_to(family_root).as_posix()
        if change.path.suffix == ".png":
            old = f"{len(change.old)} bytes" if change.old is not None else "absent"
            new = f"{len(change.new)} bytes" if change.new is not None else "removed"
            parts.append(f"binary {name}: {old} -> {new}\n")
            continue
        old_lines = change.old.decode(errors="replace").splitlines(keepends=True) if change.old else []
        new_lines = change.new.decode(errors="replace").splitlines(keepends=True) if change.new else []
        parts.append("".join(difflib.unified_diff(old_lines, new_lines, fromfile=f"a/{name}", tofile=f"b/{name}")))
    return "".join(parts)
