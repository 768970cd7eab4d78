"""Untrusted text made safe for a Markdown card: escaping, code fences, URLs.

Manifest fields and ledger values are untrusted text (a manifest comes in a pull request, a ledger record
from another machine). Everything a template prints goes through `escape_markdown` unless it is already a
`Markdown` value built here, the way Jinja's autoescape treats `Markup` in HTML: a forgotten escape is
impossible, a double escape is too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# Bidirectional controls reorder what a reader sees against what the bytes say (CVE-2021-42574,
# "Trojan Source"); zero-width characters hide text. None belongs in a model card.
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Markdown's own punctuation plus the braces of template syntax, so `{{7*7}}` stays literal and a
# placeholder check can tell generated text from an unfilled template.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}#|~<>&])")
# A value printed at the start of a line must not become a list item, a heading or a thematic break.
_LINE_START = re.compile(r"^(?:([-+=*])|(\d+)([.)])(?=\s|$))")
_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


class Markdown(str):
    """Text already safe to put into a card as is (generated here, or hand-written prose)."""

    __slots__ = ()


def strip_invisible(text: str) -> str:
    """`text` without bidirectional, zero-width and control characters (newlines and tabs are kept)."""
    return _CONTROL.sub("", _INVISIBLE.sub("", text))


def escape_markdown(text: object) -> Markdown:
    """One line of literal text: no Markdown, HTML or template syntax survives, newlines become spaces."""
    if isinstance(text, Markdown):
        return text
    value = strip_invisible(str(text)).replace("\r", " ").replace("\n", " ").replace("\t", " ")

    def escape(match: re.Match[str]) -> str:
        char = match.group(1)
        return _HTML.get(char, "\\" + char)

    escaped = _MD_SPECIAL.sub(escape, value.strip())
    return Markdown(_LINE_START.sub(_escape_line_start, escaped))


def _escape_line_start(match: re.Match[str]) -> str:
    if match.group(1):
        return "\\" + match.group(1)
    return f"{match.group(2)}\\{match.group(3)}"


def code_span(text: str) -> Markdown:
    """Inline code: the text verbatim between backtick runs longer than any it contains."""
    # A pipe splits a table cell even inside a code span (GFM); `\|` is the escape GFM honours there.
    value = strip_invisible(text).replace("\n", " ").replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", value)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return Markdown(f"{ticks}{pad}{value}{pad}{ticks}")


def code_block(text: str, *, language: str = "") -> Markdown:
    """A fenced code block whose fence no line of `text` can close early."""
    value = strip_invisible(text).rstrip("\n")
    longest = max((len(m) for m in re.findall(r"`{3,}", value)), default=0)
    fence = "`" * max(3, longest + 1)
    return Markdown(f"{fence}{language}\n{value}\n{fence}")


def safe_url(url: str) -> str | None:
    """`url` when it is a plain https URL without spaces or quotes, else None (never a `javascript:` link)."""
    if _INVISIBLE.search(url) or _CONTROL.search(url) or any(c in url for c in " \"'<>()[]`\\"):
        return None
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return None
    return url


def link(text: str, url: str) -> Markdown:
    """A Markdown link, or the escaped text alone when the URL is not a safe https URL."""
    target = safe_url(url)
    label = escape_markdown(text)
    return Markdown(f"[{label}]({target})") if target else label


def hub_url(repo_id: str) -> str:
    """The Hub page of a model repo (repo ids are validated by the manifest: owner/name, no odd characters)."""
    return f"https://huggingface.co/{repo_id}"


def prose(text: str) -> Markdown:
    """Hand-written Markdown from `sections/`: trusted for formatting, but never for invisible characters."""
    return Markdown(strip_invisible(text).strip())
