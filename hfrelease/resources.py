"""Where hfrelease's package data is: inside the wheel, or at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def templates_dir() -> Path:
    """`templates/`: shipped as `hfrelease/templates` in the wheel, at the repo's top level in a checkout."""
    for candidate in (_PACKAGE / "templates", _PACKAGE.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("hfrelease's templates/ directory is missing from this installation")


def source_root() -> Path | None:
    """The repository checkout hfrelease runs from (editable install), or None for a wheel install."""
    root = _PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "model_cards").is_dir() else None
