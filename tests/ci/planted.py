"""Planted release workflows for the rehearsal's tests: the header they share (the fixture family's MANIFEST,
no token permissions), then the jobs a test writes."""

from __future__ import annotations

import textwrap
from pathlib import Path

HEADER = """\
name: release
on: {push: {tags: ["v*"]}}
permissions: {}
env:
  MANIFEST: family/release.toml
"""


def write_workflow(root: Path, jobs: str, *, env: str = "") -> Path:
    """`root/.github/workflows/release.yml`: the header, more workflow `env` lines, then `jobs` (YAML of the
    jobs mapping, dedented)."""
    path = root / ".github" / "workflows" / "release.yml"
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + textwrap.indent(textwrap.dedent(env), "  ") + "jobs:\n"
                    + textwrap.indent(textwrap.dedent(jobs), "  "))
    return path
