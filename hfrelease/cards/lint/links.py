"""The lint's link rules: links to Hub model repos name artifacts of the family (or its base model), local
links resolve to files of the card's directory, and the commands a card prints name files a reader has.
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


_CODE_BLOCK = re.compile(r"^(`{3,})(\w*)\n(.*?)^\1$", re.S | re.M)
_SHELLS = {"", "bash", "sh", "shell", "console"}
_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# Shell words that are not file paths though they start with a slash: an HTTP endpoint `vllm bench serve` asks.
_NOT_PATHS = {"--endpoint"}


def command_paths(where: str, body: str) -> list[str]:
    """Paths outside the published repo in the commands a card prints (code blocks and code spans): a reader
    runs them from a clone of the repo, where `../../build/demo/gates/demo_json.jsonl` or `/home/me/x` does not
    exist (issue 25). Each file a command uses is shipped in the repo and named there (`prompts/<name>`)."""
    import shlex

    from hfrelease.files.rules import leaves_repo

    texts = [m.group(3) for m in _CODE_BLOCK.finditer(body) if m.group(2) in _SHELLS]
    texts += _CODE_SPAN.findall(_CODE_BLOCK.sub("", body))
    found: dict[str, None] = {}
    for text in texts:
        try:
            words = shlex.split(text.replace("\\\n", " "), comments=True)
        except ValueError:  # not a command (an unbalanced quote in prose): nothing to run
            continue
        for before, word in zip(["", *words], words, strict=False):
            value = word.partition("=")[2] if word.startswith("-") and "=" in word else word
            if before not in _NOT_PATHS and not value.startswith("-") and "://" not in value \
                    and "/" in value and leaves_repo(value):
                found.setdefault(value)
    return [f"{where}: a command names {path}, a path outside the published repo (ship the file in the repo "
            "and name it there)" for path in found]
