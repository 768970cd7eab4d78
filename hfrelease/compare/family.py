"""Compare two sides of a family, each named as `hfrelease compare` names it: the one function the CLI calls."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hfrelease.compare.rows import FamilyComparison, compare_ledgers
from hfrelease.compare.sides import read_side

if TYPE_CHECKING:
    from hfrelease.manifest import Manifest


def compare_family(
    old: str, new: str, *, manifest: Manifest | None, endpoint: str | None = None, token: str | None = None
) -> FamilyComparison:
    """Read both sides (see `hfrelease.compare.sides`) into temporary copies and compare them.

    With a manifest, both sides must be ledgers of its family: a ledger of another family compared
    against this release would say nothing about it.
    """
    from hfrelease.errors import UsageError

    with tempfile.TemporaryDirectory(prefix="hfrelease-compare-") as work:
        sides = [read_side(spec, work=Path(work) / name, manifest=manifest, endpoint=endpoint, token=token)
                 for name, spec in (("old", old), ("new", new))]
        if manifest is not None:
            for side in sides:
                if side.family != manifest.family.name:
                    raise UsageError(f"{side.label} is a ledger of family {side.family!r}, not of "
                                     f"{manifest.family.name!r} ({manifest.root})",
                                     hint="Compare two ledgers of the manifest's family, or pass its --manifest.")
        # Compared while the copies exist: samples and raw files are read from them.
        return compare_ledgers(sides[0], sides[1], manifest=manifest)
