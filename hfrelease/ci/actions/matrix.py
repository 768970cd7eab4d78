"""`strategy.matrix` expanded into its combinations, by GitHub's documented rules.

https://docs.github.com/actions/writing-workflows/choosing-what-your-workflow-does/running-variations-of-jobs-in-a-workflow
- the vectors (every key but include/exclude) multiply, in the order written;
- an `exclude` entry removes the combinations that hold all of its pairs;
- an `include` entry is added to every combination whose *original* values it does not change (values
  added by an earlier include may be overwritten); when it fits none, it is a combination of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any


class MatrixError(ValueError):
    """A matrix GitHub would refuse (the job fails before any of its combinations runs)."""


def expand_matrix(matrix: Any) -> list[dict[str, Any]]:
    """The combinations, each a mapping of matrix key to value; `[{}]` when the job has no matrix."""
    if matrix is None:
        return [{}]
    if not isinstance(matrix, Mapping):
        raise MatrixError(f"a matrix must be a mapping, not {type(matrix).__name__}")
    include = matrix.get("include") or []
    exclude = matrix.get("exclude") or []
    if not isinstance(include, list) or not isinstance(exclude, list):
        raise MatrixError("include and exclude must be lists")
    vectors = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    for key, values in vectors.items():
        if not isinstance(values, list) or not values:
            raise MatrixError(f"Matrix vector '{key}' does not contain any values")
    base = ([dict(zip(vectors, combo, strict=True)) for combo in itertools.product(*vectors.values())]
            if vectors else [])
    base = [c for c in base if not any(all(c.get(k) == v for k, v in e.items()) for e in exclude)]
    combos = [(c, dict(c)) for c in base]  # (original values, values with includes added)
    extra: list[dict[str, Any]] = []
    for entry in include:
        if not isinstance(entry, Mapping):
            raise MatrixError("an include entry must be a mapping")
        fitted = False
        for original, current in combos:
            if all(original.get(k, v) == v for k, v in entry.items()):
                current.update(entry)
                fitted = True
        if not fitted:
            extra.append(dict(entry))
    result = [current for _, current in combos] + extra
    if not result:
        raise MatrixError("Matrix must define at least one vector")
    return result
