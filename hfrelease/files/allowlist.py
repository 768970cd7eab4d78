"""The one allowlist every file a release ships (or a card quotes) goes through: where it is, what it is.

A file passes `admit` when all of these hold:

1. **Where.** Its real path, every symbolic link followed (the file's and its directories'), lies inside the
   family directory or the artifact's source (`Tree`). A name like `/etc/hostname` or `../outside/notes`, or
   a link in `results/`, `sections/` or the plugin out of the tree, is refused: the bundle publishes bytes,
   and bytes from outside the tree are nobody's declared content.
2. **Kind of file.** A regular file: a FIFO would hang the read, a device would never end.
3. **Name.** Neither a credential's (`.env`, `*.pem`, ...), a pickle's (on any suffix: `state.pth.tar`), nor
   cache or editor litter -- checked on the name it ships under and on the name of the file it resolves to.
4. **Content.** Text (UTF-8, no NUL byte), read in full whatever its suffix or size, with nothing in it shaped
   like a token or equal to a secret of the environment (`hfrelease.redact`); or one of the binary formats a
   model repo holds: safetensors weights (the header must parse and index every byte of the file, and its
   metadata is scanned like text), a checkpoint's `tokenizer.model` and a rendered plot image (by its
   signature; the bytes of both are scanned too, as Latin-1, for the strings they hold), a ledger samples
   file (gzip, decompressed as a stream and scanned like text, up to `SAMPLES_LIMIT` bytes; the ledger checks
   it against its record's sha256). Any other binary is refused: a pickle, an archive or an executable reads
   as no risk to a name-based check. One scan (`_secret_problem`) reads every one of these.

Callers say what a file is (`Kind`) and where it may be; the allowlist says whether it may ship and why not.
"""

from __future__ import annotations

import codecs
import gzip
import json
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath

from hfrelease.files import rules
from hfrelease.redact import redact

CHUNK = 1024 * 1024  # the secret scan reads text in chunks of this size
_OVERLAP = 4096  # characters kept from one chunk to the next, so a token split by a chunk edge is still found
SAFETENSORS_HEADER_LIMIT = 100 * 1024 * 1024  # the safetensors loader's own cap on the JSON header
_IMAGE_SIGNATURES = {".png": (b"\x89PNG\r\n\x1a\n",), ".jpg": (b"\xff\xd8\xff",), ".jpeg": (b"\xff\xd8\xff",),
                     ".webp": (b"RIFF",)}  # fmt: skip
_GZIP = b"\x1f\x8b"
# The most a ledger samples file may decompress to (the allowlist's bound and the ledger's reader's: it lives here,
# below `hfrelease.ledger`, which imports it). Its JSON lines hold excerpts of the responses (2,000 characters
# each: `lm_eval_results.RESPONSE_EXCERPT`), a few KiB a sample: 1 GiB is over 100,000 samples, and a gzip that
# inflates past it (a decompression bomb) is refused once that much is read.
SAMPLES_LIMIT = 1024 * 1024 * 1024
_CREDENTIAL_FOUND = "contains what looks like an access token"


class Kind(Enum):
    """What a candidate file is, which decides the binary formats it may have."""

    MODEL = "model"  # a model file of the artifact's checkpoint (weights, config, tokenizer)
    DECLARED = "declared"  # artifact.files
    RENDERED = "rendered"  # what `hfrelease render` wrote into <family>/<artifact-id>/
    LEDGER = "ledger"  # results/<artifact-id>/: records and their samples files
    PLUGIN = "plugin"  # the vLLM plugin's source tree
    SECTION = "section"  # sections/*.md, quoted into cards


@dataclass(frozen=True, kw_only=True)
class Problem:
    """Why a file may not ship, and what to do about it."""

    reason: str
    fix: str


@dataclass(frozen=True, kw_only=True)
class Tree:
    """The directories a family's files may resolve into (real paths): the family directory and a source."""

    roots: tuple[Path, ...]

    @classmethod
    def of(cls, *directories: Path | None) -> Tree:
        return cls(roots=tuple(d.resolve() for d in directories if d is not None))

    def holds(self, real: Path) -> bool:
        return any(real.is_relative_to(root) for root in self.roots)

    def outside(self, path: Path) -> Problem | None:
        """A problem when `path` (file or directory) resolves outside the tree or nowhere at all."""
        try:
            real = path.resolve(strict=True)
        except FileNotFoundError:
            what = "a broken symbolic link" if path.is_symlink() else "not found"
            return Problem(reason=what, fix="remove it, or fix what it names")
        except (OSError, RuntimeError) as exc:  # a link loop, a permission error
            return Problem(reason=f"cannot be resolved: {exc}", fix="remove it")
        if self.holds(real):
            return None
        shown = " or ".join(str(root) for root in self.roots)
        return Problem(
            reason=f"resolves to {real}, outside {shown}",
            fix="copy the file into the family directory (links out of it are never followed)",
        )


def admit(path: Path, *, tree: Tree, kind: Kind, name: str | None = None) -> Path | Problem:
    """The file's real path when it may ship as `name` (default: its own name), else why not."""
    problem = tree.outside(path)
    if problem is not None:
        return problem
    real = path.resolve()
    try:
        info = real.stat()
    except OSError as exc:
        return Problem(reason=f"cannot be read: {exc}", fix="fix its permissions or remove it")
    if not stat.S_ISREG(info.st_mode):
        what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, device or socket)"
        return Problem(reason=what, fix="name a regular file")
    shipped = PurePosixPath(name or path.name).name
    for each in dict.fromkeys((shipped, real.name)):
        problem = _name_problem(each)
        if problem is not None:
            return problem
    try:
        problem = _content_problem(real, shipped=shipped, kind=kind, size=info.st_size, rel=name or path.name)
    except OSError as exc:
        return Problem(reason=f"cannot be read: {exc}", fix="fix its permissions or remove it")
    return problem if problem is not None else real


def holds_secret(text: str) -> bool:
    """Whether `text` holds something shaped like a credential, or a secret value of the environment."""
    return redact(text) != text


def _name_problem(name: str) -> Problem | None:
    if rules.is_secret_name(name):
        return Problem(reason="looks like a credential file", fix="never publish secrets: move it out of the directory")
    if rules.is_pickle(name):
        return Problem(
            reason="a pickle format: loading it runs code, so it is never published",
            fix="convert to safetensors (safetensors.torch.save_file) and delete the pickle",
        )
    if rules.is_cache_file(name):
        return Problem(reason="a cache or editor file", fix="delete it")
    return None


def _content_problem(real: Path, *, shipped: str, kind: Kind, size: int, rel: str) -> Problem | None:
    lowered = shipped.lower()
    suffix = PurePosixPath(lowered).suffix
    if lowered.endswith(".safetensors"):
        return _safetensors_problem(real, size)
    if kind is Kind.LEDGER and lowered.endswith(".samples.jsonl.gz"):
        return _samples_problem(real)
    if kind is Kind.MODEL and lowered == "tokenizer.model":
        signatures = None  # SentencePiece's protobuf: binary, loaded by a parser that runs no code
    elif kind is Kind.RENDERED and rel.startswith("plots/") and suffix in _IMAGE_SIGNATURES:
        signatures = _IMAGE_SIGNATURES[suffix]
    else:
        with real.open("rb") as handle:
            return _secret_problem(handle.read)
    with real.open("rb") as handle:
        if signatures is not None and not handle.read(16).startswith(signatures):
            return Problem(reason=f"named {suffix} but not that image format", fix="re-render")
        handle.seek(0)
        return _secret_problem(handle.read, text=False)


def _samples_problem(real: Path) -> Problem | None:
    """A ledger samples file: gzip, whose JSON lines are scanned like text as they decompress, within
    `SAMPLES_LIMIT` (the ledger checks the content against the record's sha256 once the allowlist passed it)."""
    restore = "restore it from the ledger it was measured into"
    with real.open("rb") as handle:
        if not handle.read(2).startswith(_GZIP):
            return Problem(reason="not a gzip file", fix=restore)
        handle.seek(0)
        try:
            with gzip.GzipFile(fileobj=handle, mode="rb") as samples:
                return _secret_problem(
                    samples.read, limit=SAMPLES_LIMIT, what="decompressed, it ",
                    not_text=Problem(reason="decompressed, it is not UTF-8 text (JSON lines)", fix=restore),
                    fix="delete this samples file and the record naming it (never commit them), and measure the "
                    "gate again: a gate's process no longer sees the environment's secrets",
                )  # fmt: skip
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            return Problem(reason=f"not a valid gzip file ({exc})", fix=restore)


def _secret_problem(
    read: Callable[[int], bytes], *, text: bool = True, limit: int | None = None, what: str = "",
    not_text: Problem | None = None, fix: str = "remove the token from the file",
) -> Problem | None:
    """Scan everything `read` returns (until it returns b"") for credentials, `CHUNK` bytes at a time.

    `text`: the bytes must be UTF-8 without NUL (else `not_text`, by default: a binary that may not ship), and
    pickle data is named as such; otherwise they are scanned as Latin-1, one character a byte, for the strings a
    binary format holds. More than `limit` bytes is a problem. A problem never repeats what was found."""
    decoder = codecs.getincrementaldecoder("utf-8" if text else "latin-1")()
    tail, total = "", 0
    while True:
        chunk = read(CHUNK)
        if text and total == 0 and _looks_pickled(chunk):
            return Problem(
                reason="pickle data: loading it runs code, so it is never published",
                fix="convert to safetensors (safetensors.torch.save_file) and delete the pickle",
            )
        total += len(chunk)
        if limit is not None and total > limit:
            return Problem(reason=f"{what or 'it '}exceeds {limit / 2**20:g} MiB: not read further",
                           fix="restore it from the ledger it was measured into")  # fmt: skip
        try:
            decoded = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            return not_text or _binary()
        if text and "\x00" in decoded:
            return not_text or _binary()
        if holds_secret(tail + decoded):
            return Problem(reason=what + _CREDENTIAL_FOUND, fix=fix)
        tail = (tail + decoded)[-_OVERLAP:]
        if not chunk:
            return None


def _binary() -> Problem:
    return Problem(
        reason="a binary file that is not safetensors weights (only text and weights are published)",
        fix="ship weights as .safetensors and everything else as UTF-8 text, or leave it out",
    )


def _looks_pickled(head: bytes) -> bool:
    # Pickle protocols 2-5 start with PROTO (0x80) and the protocol number; torch.save writes a zip whose
    # members include `data.pkl`.
    return (len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5) or (
        head.startswith(b"PK\x03\x04") and b"data.pkl" in head
    )


def _safetensors_problem(real: Path, size: int) -> Problem | None:
    """The file is safetensors: an 8-byte header length, a JSON header, then exactly the tensors it indexes."""
    with real.open("rb") as handle:
        prefix = handle.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        raw = handle.read(length) if 2 <= length <= min(SAFETENSORS_HEADER_LIMIT, size - 8) else b""
    why = _safetensors_header_problem(raw, size - 8 - length) if raw else "no valid header length"
    if why is not None:
        return Problem(reason=f"not a safetensors file ({why})",
                       fix="ship real safetensors weights (safetensors.torch.save_file), nothing renamed to one")
    if holds_secret(raw.decode("utf-8")):
        return Problem(reason="its metadata " + _CREDENTIAL_FOUND, fix="re-save without it")
    return None


def _safetensors_header_problem(raw: bytes, buffer: int) -> str | None:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "its header is not JSON"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    spans = []
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):  # fmt: skip
            return f"tensor {key!r} has no valid data_offsets"
        spans.append((offsets[0], offsets[1]))
    # safetensors' format (https://github.com/huggingface/safetensors#format): the byte buffer is entirely
    # indexed, without holes or overlaps; bytes no tensor covers would be content nobody loads or sees.
    end = 0
    for begin, stop in sorted(spans):
        if begin != end:
            return "its tensors leave a gap or overlap"
        end = stop
    return None if end == buffer else f"its tensors index {end} bytes, the file holds {buffer}"
