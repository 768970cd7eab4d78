"""Write a bundle to disk (`hfrelease bundle --out DIR`): one directory per repo, exactly as it will upload."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hfrelease.atomic import write_atomic
from hfrelease.bundle.plan import FamilyBundle


def write_bundle(bundle: FamilyBundle, out: Path) -> list[Path]:
    """`out/<artifact-id>/...` per repo; files are hard links where possible (weights are large), else copies."""
    written = []
    for repo in bundle.repos:
        root = out / repo.artifact_id
        for item in repo.files:
            if item.in_repo:
                continue  # held by the repo on the Hub at the pinned revision (listed in MANIFEST all the same)
            target = root / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            if item.source is None:
                write_atomic(target, item.read())
                continue
            try:
                os.link(item.source, target)
            except OSError:  # another filesystem, or links not allowed
                shutil.copyfile(item.source, target)
        written.append(root)
    return written
