"""Where hfrelease keeps what it can compute again: its cache directory and the hash cache every stage shares.

Below every package that caches (the vLLM speculative-method catalog in `hfrelease/serving/`, the lm-eval task
catalog, the stages' request cache and hash cache), so none of them reaches up into `hfrelease/stages/` for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hfrelease.files.hashing import HashCache


def cache_dir() -> Path:
    """hfrelease's cache directory: `HFRELEASE_CACHE`, else ~/.cache/hfrelease."""
    return Path(os.environ.get("HFRELEASE_CACHE") or Path.home() / ".cache" / "hfrelease")


def default_hash_cache() -> HashCache:
    """The one hash cache every stage shares: weights hashed by `eval` are not read again by `publish`."""
    from hfrelease.files.hashing import HashCache

    return HashCache(cache_dir() / "hashes.json")
