"""Reading a manifest is bounded: regular files only, a size cap, any nesting depth, strict types."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import pytest

from hfrelease.errors import ConfigError, ExitCode
from hfrelease.manifest import load_manifest, parse_manifest
from hfrelease.manifest.loading import MAX_MANIFEST_BYTES, validate_manifest
from tests.manifest.test_manifest_fuzz import VALID

pytestmark = pytest.mark.unit

FAMILY = Path(__file__).resolve().parent.parent / "fixtures" / "family"


def refused(path: Path) -> str:
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        load_manifest(path)
    assert time.monotonic() - started < 5  # at once, never a hang or a read until memory runs out
    assert caught.value.exit_code == ExitCode.CONFIG
    return caught.value.message


def test_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """A release.toml that is a FIFO is refused without blocking on it."""
    fifo = tmp_path / "release.toml"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)


def test_link_to_dev_zero_is_refused_at_once(tmp_path: Path) -> None:
    """A release.toml linked to /dev/zero is refused without reading it."""
    (tmp_path / "release.toml").symlink_to("/dev/zero")
    assert "not a regular file" in refused(tmp_path)


def test_oversized_manifest_is_refused(tmp_path: Path) -> None:
    """A manifest over the size cap is refused before it is parsed."""
    big = tmp_path / "release.toml"
    big.write_text("# " + "x" * MAX_MANIFEST_BYTES + "\n")
    assert "at most" in refused(big)


def test_deeply_nested_arrays_are_a_config_error() -> None:
    """100k-deep nested arrays are a clear config error (exit 3), not a RecursionError (exit 1)."""
    text = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_manifest(text, root=FAMILY)
    assert "nested more than" in caught.value.message


def test_moderately_deep_nesting_is_refused_too() -> None:
    """Nesting tomllib can parse but later stages should never walk is refused with the same message."""
    text = "x = " + "[" * 200 + "]" * 200 + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_manifest(text, root=FAMILY)
    assert "nested more than" in caught.value.message


def test_schema_version_true_is_refused() -> None:
    """`schema_version = true` is not the integer 1 (Python's True == 1 does not count)."""
    data = copy.deepcopy(VALID)
    data["schema_version"] = True
    with pytest.raises(ConfigError) as caught:
        validate_manifest(data, root=FAMILY, check_files=False)
    assert any(p.location == "schema_version" for p in caught.value.problems)


def test_real_manifest_still_loads() -> None:
    """The fixture family loads as before through the bounded reader."""
    assert load_manifest(FAMILY).family.name
