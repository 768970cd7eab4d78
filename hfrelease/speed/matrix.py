"""The draft x target matrix: which artifacts a draft can be served with, checked on their files.

A draft proposes token ids of the vocabulary it was trained with; a target that reads the same ids as other
text (another tokenizer) or has another vocabulary size would verify nonsense, or fail to load the draft. So
a draft with `matrix = true` is measured against every artifact whose tokenizer files are byte-identical to
its trained target's (sha256 over `TOKENIZER_FILES` present) and whose `config.json` vocabulary size is the
same -- and, for a draft model that ships its own tokenizer, identical to the draft's too. Nothing is
assumed: an artifact whose files are not on this machine (a Hub source not downloaded) or that has no
tokenizer file is not a target, and `unchecked` says why.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from hfrelease.manifest import Artifact, Manifest

# The files that decide which text a token id is: the vocabulary and merges, in whichever form the tokenizer
# ships them. tokenizer_config.json is left out: it also holds the chat template, which quants may edit.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt",
                   "special_tokens_map.json", "added_tokens.json")


@dataclass(frozen=True, kw_only=True)
class Vocabulary:
    """What identifies the token ids a model reads and writes."""

    tokenizer_sha256: str | None  # over the tokenizer files present, by name; None: it ships none
    vocab_size: int | None  # config.json's vocab_size (a multimodal config's text_config's)


def vocabulary(directory: Path) -> Vocabulary:
    """The vocabulary of the model files in `directory`."""
    digest = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        path = directory / name
        if path.is_file():
            found = True
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    size = None
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if isinstance(config, dict):
        text = config.get("text_config")
        raw = config.get("vocab_size", text.get("vocab_size") if isinstance(text, dict) else None)
        size = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    return Vocabulary(tokenizer_sha256=digest.hexdigest() if found else None, vocab_size=size)


def incompatibility(draft: Vocabulary, trained: Vocabulary, candidate: Vocabulary) -> str | None:
    """Why `candidate` cannot serve as a target of a draft trained against `trained`, or None when it can."""
    if candidate.tokenizer_sha256 is None:
        return "it ships no tokenizer file to compare"
    if trained.tokenizer_sha256 is None:
        return "the draft's trained target ships no tokenizer file to compare"
    if candidate.tokenizer_sha256 != trained.tokenizer_sha256:
        return "its tokenizer files differ from the trained target's"
    if draft.tokenizer_sha256 is not None and draft.tokenizer_sha256 != candidate.tokenizer_sha256:
        return "its tokenizer files differ from the draft's own"
    if candidate.vocab_size is None or candidate.vocab_size != trained.vocab_size:
        return f"its vocabulary size {candidate.vocab_size} is not the trained target's {trained.vocab_size}"
    return None


@dataclass(frozen=True, kw_only=True)
class Targets:
    """The artifacts a matrix draft is measured against, and those left out with the reason."""

    compatible: tuple[str, ...]
    unchecked: tuple[tuple[str, str], ...]  # (artifact id, why it is not a target)


def matrix_targets(manifest: Manifest, draft: Artifact, directories: dict[str, Path | None]) -> Targets:
    """Every non-draft artifact that can serve `draft` as its target (its trained target first), judged on
    the files in `directories` (artifact id -> local model files, None when not on this machine)."""
    assert draft.draft is not None
    trained_id = draft.draft.target
    trained_dir, draft_dir = directories.get(trained_id), directories.get(draft.id)
    candidates = [a for a in manifest.artifact if a.kind != "draft"]
    candidates.sort(key=lambda a: a.id != trained_id)
    if trained_dir is None or draft_dir is None:
        why = "the files of the draft or of its trained target are not on this machine"
        return Targets(compatible=(trained_id,), unchecked=tuple((a.id, why) for a in candidates if a.id != trained_id))
    trained, own = vocabulary(trained_dir), vocabulary(draft_dir)
    compatible: list[str] = []
    unchecked: list[tuple[str, str]] = []
    for artifact in candidates:
        if artifact.id == trained_id:
            compatible.append(artifact.id)  # declared: the verifier it was trained against
            continue
        directory = directories.get(artifact.id)
        if directory is None:
            unchecked.append((artifact.id, "its files are not on this machine (a Hub source not downloaded)"))
            continue
        problem = incompatibility(own, trained, vocabulary(directory))
        if problem is None:
            compatible.append(artifact.id)
        else:
            unchecked.append((artifact.id, problem))
    return Targets(compatible=tuple(compatible), unchecked=tuple(unchecked))
