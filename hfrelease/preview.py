"""The family's rendered cards as the Hub shows them: static HTML pages a browser (or a reader) can open.

Each card becomes `<artifact>/index.html`: its Markdown body rendered with GFM tables, its YAML metadata
shown in a sidebar beside it the way the Hub's model page shows it (license, library, pipeline, base
model, tags, evaluation results), its `plots/` copied beside it, and every link to one of the family's
repos pointed at that repo's page in the preview, so cross-links can be followed offline. The built-in
Hub shows each model repo's card with the same layout (`hub_page_html`), addressed as the Hub addresses it.

The layout is the Hub's at a 1200 px window: the card column is `CARD_COLUMN_PX` wide (the width the card
lint's table budget assumes, `hfrelease.cards.lint.readability.MAX_TABLE_WIDTH`), tables in 14 px text, images at
most the column's width. Tables are laid out as a browser lays them out (wrapping at spaces) and are not
clipped, so a table too wide for the column shows past it, as it would scroll out of view on the Hub.
"""

from __future__ import annotations

import contextlib
import html
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hfrelease.errors import UsageError

# The Hub's model page at a 1200 px window puts the card in a column about 730 px wide (the README's
# "Width"), with the metadata sidebar to its right. The card lint's 100-character table budget is derived
# from the same number, so the browser test measures what the lint predicts.
CARD_COLUMN_PX = 730
VIEWPORT_PX = 1200
HUB_URL = "https://huggingface.co/"
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
# What a page may load and run: its own styles and images, nothing else. A card's hand-written sections are
# Markdown with inline HTML, which the Hub sanitizes before showing; the pages here are sanitized the same way
# (`sanitize_html`) and served with this policy as a second wall, so a `<script>` in a section never runs in
# a maintainer's browser, from `hfrelease preview` or the built-in Hub's model page.
PAGE_CSP = ("default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")

_STYLE = f"""
* {{ box-sizing: border-box; }}
body {{ margin: 0; font: 16px/1.6 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111827;
        background: #ffffff; }}
header {{ border-bottom: 1px solid #e5e7eb; padding: 12px 32px; font-weight: 600; }}
header nav a {{ margin-right: 16px; font-weight: 400; }}
main {{ display: flex; gap: 40px; padding: 24px 32px; max-width: {VIEWPORT_PX}px; margin: 0 auto; }}
.card {{ width: {CARD_COLUMN_PX}px; flex: none; min-width: 0; }}
.card table {{ border-collapse: collapse; font-size: 14px; line-height: 1.4; margin: 16px 0; }}
.card th, .card td {{ border: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }}
.card img {{ max-width: 100%; }}
.card pre {{ overflow-x: auto; background: #f9fafb; padding: 8px; font-size: 13px; }}
aside {{ flex: 1; min-width: 0; font-size: 14px; border-left: 1px solid #e5e7eb; padding-left: 24px; }}
aside dt {{ font-weight: 600; margin-top: 12px; }}
aside dd {{ margin: 0; overflow-wrap: anywhere; }}
aside .tag {{ display: inline-block; background: #f3f4f6; border-radius: 6px; padding: 0 6px; margin: 2px; }}
aside table {{ border-collapse: collapse; width: 100%; }}
aside td {{ border-top: 1px solid #e5e7eb; padding: 2px 4px; }}
aside td:last-child {{ white-space: nowrap; }}
"""


@dataclass(frozen=True, kw_only=True)
class PreviewCard:
    """One card of the family: where its rendered directory is and the page written for it."""

    artifact: str
    repo: str
    directory: Path
    metadata: Mapping[str, Any]
    body_html: str


@dataclass(frozen=True, kw_only=True)
class Preview:
    """The family's cards ready to be written as a static site."""

    family: str
    cards: tuple[PreviewCard, ...]


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The card's YAML metadata block (empty when it has none) and the Markdown body after it."""
    import yaml

    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    data = yaml.safe_load(match.group(1)) or {}
    return (data if isinstance(data, dict) else {}), text[match.end():]


def render_markdown(body: str, *, repo_pages: Mapping[str, str] | None = None,
                    rewrite: Callable[[str], str] | None = None) -> str:
    """The body as HTML: CommonMark with GFM tables and strikethrough, as the Hub renders a card.

    Inline HTML is kept (cards use `<details>` and `<br>`, which the Hub renders). A link to one of the
    family's repos (`https://huggingface.co/<repo>`, a key of `repo_pages`) is pointed at that repo's
    preview page; `rewrite`, when given, maps every link and image address instead.
    """
    from markdown_it import MarkdownIt

    def family_page(href: str) -> str:
        repo = href.removeprefix(HUB_URL).rstrip("/") if href.startswith(HUB_URL) else None
        return (repo_pages or {}).get(repo or "", href)

    mapping = rewrite or family_page
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    tokens = md.parse(body)
    for token in tokens:
        for child in token.children or ():
            attribute = {"link_open": "href", "image": "src"}.get(child.type)
            if attribute is not None:
                child.attrSet(attribute, mapping(str(child.attrGet(attribute) or "")))
    return sanitize_html(str(md.renderer.render(tokens, md.options, {})))


def sanitize_html(fragment: str) -> str:
    """A card's HTML as the Hub shows it: scripts, event handlers, `javascript:` links and unknown tags gone.

    nh3 (Rust's ammonia) with its default allow-list, which keeps what cards use (`<details>`, `<summary>`,
    `<br>`, tables, images); plus the `text-align` style markdown-it writes on aligned table cells.
    """
    import nh3

    cell = {"style"}
    attributes = {**nh3.ALLOWED_ATTRIBUTES, "td": nh3.ALLOWED_ATTRIBUTES.get("td", set()) | cell,
                  "th": nh3.ALLOWED_ATTRIBUTES.get("th", set()) | cell}
    return nh3.clean(fragment, attributes=attributes, filter_style_properties={"text-align"},
                     clean_content_tags={"script", "style"})


def hub_addresses(repo: str, revision: str) -> Callable[[str], str]:
    """Addresses as a card's page on a Hub has them: repos as pages of this Hub, relative paths as files.

    On the Hub a card's relative link or image (`plots/x.png`) is the repo's file at the shown revision
    (`/<repo>/resolve/<revision>/plots/x.png`), and a link to `https://huggingface.co/<repo>` is the page
    this Hub serves for that repo.
    """

    def rewrite(href: str) -> str:
        if href.startswith(HUB_URL):
            return "/" + href.removeprefix(HUB_URL)
        if not href or href.startswith(("#", "/")) or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href):
            return href
        return f"/{repo}/resolve/{revision}/{href.removeprefix('./')}"

    return rewrite


def hub_page_html(readme: str, *, repo: str, revision: str = "main") -> str:
    """A repo's model page on the built-in Hub: its README as the Hub shows it, metadata beside it."""
    metadata, body = split_front_matter(readme)
    card = PreviewCard(artifact=repo, repo=repo, directory=Path(), metadata=metadata,
                       body_html=render_markdown(body, rewrite=hub_addresses(repo, revision)))
    return _hub_page(repo, f'<article class="card">{card.body_html}</article>'
                           f"<aside>{sidebar_html(card.metadata)}</aside>")


def hub_files_page_html(repo: str, files: dict[str, int], *, revision: str) -> str:
    """A repo's page on the built-in Hub when it has no README.md: it says so, and lists the files (path, size),
    each linked to its download at `revision`."""
    esc = html.escape
    rows = "".join(f'<tr><td><a href="{esc(f"/{repo}/resolve/{revision}/{quote(path)}")}">{esc(path)}</a></td>'
                   f"<td>{size:,} bytes</td></tr>" for path, size in sorted(files.items()))
    return _hub_page(repo, f'<article class="card"><p>This repository has no model card (no README.md at '
                           f"{esc(revision[:12])}).</p><h2>Files</h2><table><tbody>{rows}</tbody></table></article>")


def _hub_page(repo: str, main: str) -> str:
    esc = html.escape
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(repo)}</title>'
            f"<style>{_STYLE}</style></head><body><header>{esc(repo)}</header>"
            f"<main>{main}</main></body></html>\n")


def read_preview(manifest: Any) -> Preview:
    """Every rendered card of the manifest's family (a card not rendered yet is a usage error)."""
    artifacts = list(manifest.artifact)
    repo_pages = {a.repo: f"../{a.id}/index.html" for a in artifacts}
    cards: list[PreviewCard] = []
    missing: list[str] = []
    for artifact in artifacts:
        directory = manifest.root / artifact.id
        readme = directory / "README.md"
        if not readme.is_file():
            missing.append(artifact.id)
            continue
        metadata, body = split_front_matter(readme.read_text(encoding="utf-8"))
        cards.append(PreviewCard(artifact=artifact.id, repo=artifact.repo, directory=directory,
                                 metadata=metadata, body_html=render_markdown(body, repo_pages=repo_pages)))
    if missing:
        raise UsageError(f"no rendered card for {', '.join(missing)} in {manifest.root}",
                         hint="run `hfrelease render` first")
    return Preview(family=manifest.family.name, cards=tuple(cards))


def _items(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def sidebar_html(metadata: Mapping[str, Any]) -> str:
    """The metadata the Hub shows beside a card: what its YAML says, in the Hub's order."""
    esc = html.escape
    rows: list[str] = []
    for key, label in (("license", "License"), ("library_name", "Library"), ("pipeline_tag", "Task"),
                       ("base_model", "Base model"), ("base_model_relation", "Relation to base"),
                       ("language", "Languages"), ("datasets", "Datasets")):
        values = _items(metadata.get(key))
        if values:
            rows.append(f"<dt>{label}</dt><dd>{', '.join(esc(v) for v in values)}</dd>")
    tags = _items(metadata.get("tags"))
    if tags:
        rows.append("<dt>Tags</dt><dd>" + "".join(f'<span class="tag">{esc(t)}</span>' for t in tags) + "</dd>")
    results: list[str] = []
    for entry in metadata.get("model-index") or ():
        for result in entry.get("results") or ():
            dataset = (result.get("dataset") or {}).get("name", "")
            for metric in result.get("metrics") or ():
                results.append(f"<tr><td>{esc(str(dataset))}</td><td>{esc(str(metric.get('name', '')))}</td>"
                               f"<td>{esc(str(metric.get('value', '')))}</td></tr>")
    if results:
        rows.append("<dt>Evaluation results</dt><dd><table>" + "".join(results) + "</table></dd>")
    return "<dl>" + "".join(rows) + "</dl>"


def page_html(card: PreviewCard, preview: Preview) -> str:
    """One card's page: the family's navigation, the card column and the metadata sidebar."""
    esc = html.escape
    nav = "".join(f'<a href="../{c.artifact}/index.html">{esc(c.artifact)}</a>' for c in preview.cards)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(card.repo)}</title>'
            f'<link rel="stylesheet" href="../style.css"></head><body>'
            f"<header>{esc(card.repo)} <nav>{nav}</nav></header>"
            f'<main><article class="card">{card.body_html}</article>'
            f"<aside>{sidebar_html(card.metadata)}</aside></main></body></html>\n")


def index_html(preview: Preview) -> str:
    """The preview's front page: one link per card."""
    esc = html.escape
    items = "".join(f'<li><a href="{c.artifact}/index.html">{esc(c.repo)}</a> ({esc(c.artifact)})</li>'
                    for c in preview.cards)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(preview.family)}</title>'
            f'<link rel="stylesheet" href="style.css"></head><body><header>{esc(preview.family)}</header>'
            f'<main><article class="card"><ul>{items}</ul></article></main></body></html>\n')


def write_preview(preview: Preview, out: Path) -> list[Path]:
    """Write the static site under `out` (its pages replaced, each card's plots copied); returns the pages."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "style.css").write_text(_STYLE, encoding="utf-8")
    (out / "index.html").write_text(index_html(preview), encoding="utf-8")
    pages = [out / "index.html"]
    for card in preview.cards:
        target = out / card.artifact
        if target.exists():
            shutil.rmtree(target)
        target.mkdir()
        # Everything the card directory holds except the Markdown itself: plots and citation files, which
        # the card links relatively, as they sit beside the README in the published repo.
        for path in sorted(card.directory.iterdir()):
            if path.name == "README.md":
                continue
            if path.is_dir():
                shutil.copytree(path, target / path.name)
            else:
                shutil.copy2(path, target / path.name)
        page = target / "index.html"
        page.write_text(page_html(card, preview), encoding="utf-8")
        pages.append(page)
    return pages


def serve_directory(root: Path, *, host: str = "127.0.0.1", port: int = 0) -> Any:
    """A static server of `root` in a background thread (a `ThreadingHTTPServer`; call `shutdown()`)."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class _Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # the preview's requests are not news
            pass

        def end_headers(self) -> None:
            self.send_header("Content-Security-Policy", PAGE_CSP)
            super().end_headers()

    server = ThreadingHTTPServer((host, port), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextlib.contextmanager
def served_preview(site: Preview, *, port: int = 0) -> Iterator[str]:
    """`site`'s pages written to a temporary directory and served on `port` (0: a free one) while the block
    runs; yields the base URL. The server stops and the pages are removed after, also on Ctrl-C."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hfrelease-preview-") as tmp:
        write_preview(site, Path(tmp))
        server = serve_directory(Path(tmp), port=port)
        try:
            host, bound = server.server_address[:2]
            yield f"http://{host}:{bound}/"
        finally:
            server.shutdown()
            server.server_close()  # the port is free again as soon as the preview ends


def card_urls(base: str, preview: Preview) -> Sequence[str]:
    """The URL of each card's page under a server's base URL."""
    return [f"{base.rstrip('/')}/{c.artifact}/index.html" for c in preview.cards]
