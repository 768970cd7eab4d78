"""The lint's link rule: links to Hub model repos name artifacts of the family (or its base model), local
links resolve to files of the card's directory.
"""

from __future__ import annotations

import re
from pathlib import Path

HUB_LINK = re.compile(r"\]\((https://huggingface\.co/[^)\s]*)\)")
LOCAL_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)")
_NOT_MODELS = {"datasets", "spaces", "collections", "docs", "papers", "blog", "organizations"}


def links(where: str, body: str, repos: set[str], directory: Path) -> list[str]:
    """Links to Hub repos outside `repos` (dangling cross-links) and local links to no file of `directory`."""
    problems = []
    for url in HUB_LINK.findall(body):
        parts = url.removeprefix("https://huggingface.co/").split("/")
        if parts[0] in _NOT_MODELS or len(parts) < 2:
            continue
        repo = "/".join(parts[:2])
        if repo not in repos:
            problems.append(f"{where}: link to {url} is not an artifact of the family (dangling cross-link)")
    for target in LOCAL_LINK.findall(body):
        if ".." in target.split("/") or not (directory / target).is_file():
            problems.append(f"{where}: link to {target} does not resolve to a file of the card")
    return problems
