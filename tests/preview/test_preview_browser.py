"""The preview opened in headless Chromium at the Hub's 1200 px window: tables fit, images load, links resolve.

Chromium is Debian's package (scripts/setup installs it where apt is available); Playwright drives it
through its own protocol client, with `executable_path` so no browser is downloaded. CI sets
HFRELEASE_REQUIRE_CHROMIUM=1 (.ci/run), so there a missing browser fails instead of skipping.
"""

from __future__ import annotations

import os

# Xet cannot be emulated by the built-in Hub; huggingface_hub reads this once, at import (tests/hub_fixtures.py).
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi

from hfrelease.manifest import load_manifest
from hfrelease.preview import CARD_COLUMN_PX, VIEWPORT_PX, read_preview, serve_directory, write_preview

CHROMIUM = Path(os.environ.get("HFRELEASE_CHROMIUM", "/usr/bin/chromium"))
# The flags this machine needs: no sandbox (root in a container), no GPU, and nothing reaching the network.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REQUIRED = os.environ.get("HFRELEASE_REQUIRE_CHROMIUM") == "1"
HUB_TOKEN = "hf_previewtest_0123456789abcdef"

_MEASURE = r"""() => {
  const column = document.querySelector('article.card').getBoundingClientRect();
  const tables = [...document.querySelectorAll('article.card table')].map(t => {
    const r = t.getBoundingClientRect();
    return {right: r.right, width: r.width, head: (t.querySelector('tr') || t).innerText.slice(0, 80)};
  });
  const images = [...document.images].map(
    i => ({src: i.getAttribute('src'), loaded: i.complete && i.naturalWidth > 0}));
  const links = [...document.querySelectorAll('a[href]')].map(a => ({href: a.href, raw: a.getAttribute('href')}));
  // Issue 25: every block fits the column without scrolling sideways; the choice table is in the first screen.
  const blocks = [...document.querySelectorAll('article.card pre, article.card p')].map(
    b => ({over: b.scrollWidth - b.clientWidth, right: b.getBoundingClientRect().right, tag: b.tagName,
           head: b.innerText.slice(0, 60)}));
  const heading = [...document.querySelectorAll('article.card h2')].find(
    h => /^(Which artifact should I choose\?|The family)$/.test(h.textContent.trim()));
  let choose = null;
  for (let e = heading && heading.nextElementSibling; e && e.tagName !== 'H2'; e = e.nextElementSibling) {
    const table = e.tagName === 'TABLE' ? e : e.querySelector('table');
    if (table) { const rows = table.querySelectorAll('tr'); choose = rows[Math.min(1, rows.length - 1)]
      .getBoundingClientRect().bottom + window.scrollY; break; }
  }
  return {top: column.top + window.scrollY, right: column.right, width: column.width, tables, images, links,
          blocks, choose, screen: window.innerHeight};
}"""


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (HFRELEASE_REQUIRE_CHROMIUM=1: CI must run the browser test)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium context with a fresh profile and a 1200 px window."""
    if not CHROMIUM.is_file():
        _unavailable(f"{CHROMIUM} not installed (scripts/setup installs Debian's chromium where apt works)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (a dev dependency: scripts/setup installs it)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), headless=True,
            args=FLAGS, viewport={"width": VIEWPORT_PX, "height": 900})
        try:
            yield context
        finally:
            context.close()


def inspect_site(context: Any, site: Path, shots: Path) -> list[str]:
    """Every problem a reader would meet in the preview under `site`, one line each."""
    server = serve_directory(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        names = sorted(p.parent.name for p in site.glob("*/index.html"))
        return inspect_pages(context, base, {name: f"{base}/{name}/index.html" for name in names}, shots)
    finally:
        server.shutdown()


def inspect_pages(context: Any, base: str, pages: dict[str, str], shots: Path) -> list[str]:
    """Every problem a reader would meet on these pages (name: URL) served from `base`, one line each."""
    from PIL import Image

    problems: list[str] = []
    page = context.new_page()
    try:
        for name, url in pages.items():
            page.goto(url, wait_until="load")
            found = page.evaluate(_MEASURE)
            if abs(found["width"] - CARD_COLUMN_PX) > 1:
                problems.append(f"{name}: card column is {found['width']} px, not {CARD_COLUMN_PX}")
            for table in found["tables"]:
                if table["right"] > found["right"] + 0.5:
                    problems.append(f"{name}: table {table['head']!r} is {table['width']:.0f} px wide, overflowing "
                                    f"the {CARD_COLUMN_PX} px card column")
            for block in found["blocks"]:
                if block["over"] > 0 or block["right"] > found["right"] + 0.5:
                    problems.append(f"{name}: a {block['tag'].lower()} block {block['head']!r} is wider than the "
                                    f"{CARD_COLUMN_PX} px card column (by {block['over']} px)")
            if found["choose"] is None:
                problems.append(f"{name}: no choice table")
            elif found["choose"] > found["screen"]:
                problems.append(f"{name}: the choice table's first row ends {found['choose']:.0f} px down, below the "
                                f"first screen ({found['screen']} px at {VIEWPORT_PX} px wide)")
            for image in found["images"]:
                if not image["loaded"]:
                    problems.append(f"{name}: image {image['src']} does not load")
            for link in found["links"]:
                href = link["href"]
                if not href.startswith(base):
                    continue  # the real Hub and other sites: not reachable offline, not the family's
                target, _, fragment = href.partition("#")
                status = page.request.get(target).status
                if status >= 400:
                    problems.append(f"{name}: link {link['raw']} does not resolve (HTTP {status})")
                elif fragment and target == page.url.partition("#")[0] and not page.evaluate(
                        "f => document.getElementById(decodeURIComponent(f)) !== null", fragment):
                    problems.append(f"{name}: link {link['raw']} names no anchor of the page")
            # The screenshot check: the gutter between the card column and the sidebar must stay blank;
            # a table too wide for the column paints its borders and text there.
            shot = shots / f"{name.replace('/', '--')}.png"
            page.screenshot(path=str(shot), full_page=True)
            with Image.open(shot) as image:
                right = int(found["right"])
                gutter = image.convert("RGB").crop((right + 2, int(found["top"]), right + 30, image.height))
                if gutter.getextrema() != ((255, 255), (255, 255), (255, 255)):
                    problems.append(f"{name}: something is drawn right of the card column ({shot})")
    finally:
        page.close()
    return problems


def _site(family: Path, out: Path) -> Path:
    write_preview(read_preview(load_manifest(family / "release.toml", check_files=False)), out)
    return out


def test_demo_cards_fit_load_and_link(browser: Any, repo_root: Path, tmp_path: Path) -> None:
    """The committed demo cards: no table overflows the 730 px column, every image loads, every link resolves."""
    site = _site(repo_root / "model_cards" / "demo", tmp_path / "site")
    assert inspect_site(browser, site, tmp_path) == []


def test_a_long_command_and_a_late_choice_table_are_caught(browser: Any, repo_root: Path, tmp_path: Path) -> None:
    """A code line wider than the column and a choice table pushed below the first screen each fail."""
    family = tmp_path / "demo"
    shutil.copytree(repo_root / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results"))
    card = family / "w8a8-int8" / "README.md"
    text = card.read_text(encoding="utf-8")
    late = "\n\n".join(["A paragraph of hand-written text before the choice."] * 30)
    text = text.replace("## Which artifact should I choose?", late + "\n\n## Which artifact should I choose?", 1)
    card.write_text(text + "\n```bash\nvllm serve " + "--a-very-long-flag=value " * 12 + "\n```\n", encoding="utf-8")
    problems = inspect_site(browser, _site(family, tmp_path / "site"), tmp_path)
    assert [p.split(":")[0] for p in problems] == ["w8a8-int8"] * 2, problems
    assert "wider than the 730 px card column" in problems[0]
    assert "below the first screen" in problems[1]


def test_planted_defects_are_caught(browser: Any, repo_root: Path, tmp_path: Path) -> None:
    """A too-wide table, a missing image and a broken link planted in a card each fail the check."""
    family = tmp_path / "demo"
    shutil.copytree(repo_root / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results"))
    card = family / "fp8-dynamic" / "README.md"
    wide = " | ".join(f"unbreakable_column_name_{i:02d}" for i in range(8))
    card.write_text(card.read_text(encoding="utf-8") + "\n\n| " + wide + " |\n|" + " --- |" * 8 + "\n| "
                    + " | ".join(["value_without_spaces_here"] * 8) + " |\n\n![lost plot](plots/missing.png)\n\n"
                    "[the recipe](recipe/missing.yaml)\n", encoding="utf-8")
    problems = inspect_site(browser, _site(family, tmp_path / "site"), tmp_path)
    assert [p.split(":")[0] for p in problems] == ["fp8-dynamic"] * 4, problems
    assert "overflowing the 730 px card column" in problems[0]
    assert "plots/missing.png does not load" in problems[1]
    assert "recipe/missing.yaml does not resolve (HTTP 404)" in problems[2]
    assert "drawn right of the card column" in problems[3]


def test_cards_published_to_the_built_in_hub_fit_load_and_link(
        browser: Any, repo_root: Path, tmp_path: Path, isolated_hub_client: None) -> None:
    """The demo cards on the built-in Hub's model pages: tables fit, plots load, links between repos resolve."""
    from hfrelease.hub import serve

    loaded = load_manifest(repo_root / "model_cards" / "demo" / "release.toml", check_files=False)
    with serve(tmp_path / "hub", tokens=[HUB_TOKEN]) as hub:
        api = HfApi(endpoint=hub.url, token=HUB_TOKEN)
        for artifact in loaded.artifact:
            api.create_repo(artifact.repo, exist_ok=True)
            api.upload_folder(repo_id=artifact.repo, folder_path=loaded.root / artifact.id)
        pages = {a.repo: f"{hub.url}/{a.repo}" for a in loaded.artifact}
        assert inspect_pages(browser, hub.url, pages, tmp_path) == []
