"""`hfrelease preview` pages: Markdown as the Hub renders it, the metadata sidebar, cross-links, plots."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hfrelease.preview import PAGE_CSP, hub_addresses, render_markdown, sidebar_html, split_front_matter
from tests.conftest import CliRun


def test_front_matter_is_split_from_the_body() -> None:
    """The YAML block becomes the metadata and the Markdown after it the body."""
    metadata, body = split_front_matter("---\nlicense: mit\ntags: [a]\n---\n# Title\n")
    assert metadata == {"license": "mit", "tags": ["a"]}
    assert body == "# Title\n"
    assert split_front_matter("# No metadata\n") == ({}, "# No metadata\n")


def test_gfm_tables_and_inline_html_render() -> None:
    """A GFM table becomes an HTML table; `<details>` and `<br>` pass through as the Hub renders them."""
    text = "| a | b |\n| --- | --- |\n| 1<br>2 | ~~x~~ |\n\n<details><summary>s</summary>\n\nt\n</details>\n"
    out = render_markdown(text, repo_pages={})
    assert "<table>" in out and "<td>1<br>2</td>" in out and "<s>x</s>" in out
    assert "<details><summary>s</summary>" in out


@pytest.mark.parametrize("hostile", [
    "<script>alert(1)</script>",
    '<img src="plots/a.png" onerror="alert(1)">',
    '<a href="javascript:alert(1)">x</a>',
    '<iframe src="https://example.com"></iframe>',
    "<style>body { display: none }</style>",
    '<svg><script>alert(1)</script></svg>',
    '<details open ontoggle="alert(1)"><summary>s</summary></details>',
])
def test_hand_written_html_is_sanitized_as_the_hub_does(hostile: str) -> None:
    """A section's inline HTML that runs code or loads another site is gone; what cards use stays."""
    out = render_markdown(f"# T\n\n{hostile}\n\n| a | b |\n| --: | --- |\n| 1 | 2 |\n", repo_pages={})
    for marker in ("<script", "alert(", "javascript:", "<iframe", "<style", "onerror", "ontoggle"):
        assert marker not in out
    assert '<td style="text-align:right">1</td>' in out


def test_links_to_family_repos_point_at_their_preview_pages() -> None:
    """A link to a family repo leads to its page in the preview; any other link is left as written."""
    out = render_markdown("[q](https://huggingface.co/org/q) [o](https://huggingface.co/other/x) [p](plots/a.png)",
                          repo_pages={"org/q": "../q/index.html"})
    assert 'href="../q/index.html"' in out
    assert 'href="https://huggingface.co/other/x"' in out and 'href="plots/a.png"' in out


def test_sidebar_shows_the_metadata_the_hub_shows() -> None:
    """License, base model, relation, tags and model-index results appear in the sidebar, escaped."""
    html = sidebar_html({"license": "apache-2.0", "base_model": ["org/ref"], "base_model_relation": "quantized",
                         "tags": ["<b>"], "model-index": [{"results": [{"dataset": {"name": "Arith"},
                                                                        "metrics": [{"name": "em", "value": 99.0}]}]}]})
    assert "apache-2.0" in html and "org/ref" in html and "quantized" in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert "<td>Arith</td><td>em</td><td>99.0</td>" in html


def test_preview_out_writes_every_card_with_its_plots(cli: CliRun, repo_root: Path, tmp_path: Path) -> None:
    """`preview --out` writes an index, one page per card, and each card's plots beside its page."""
    code, _, err = cli(["preview", str(repo_root / "model_cards" / "demo"), "--out", str(tmp_path / "site")])
    assert code == 0, err
    site = tmp_path / "site"
    assert (site / "index.html").is_file() and (site / "style.css").is_file()
    page = (site / "fp8-dynamic" / "index.html").read_text(encoding="utf-8")
    assert 'href="../reference/index.html"' in page and "<table>" in page
    assert (site / "fp8-dynamic" / "plots" / "quality-deltas.png").is_file()


def test_preview_of_an_unrendered_family_says_to_render(cli: CliRun, repo_root: Path, tmp_path: Path) -> None:
    """A family whose cards are not rendered yet is a usage error (exit 2) that says to run render."""
    family = tmp_path / "demo"
    shutil.copytree(repo_root / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results"))
    (family / "draft" / "README.md").unlink()
    code, _, err = cli(["preview", str(family), "--out", str(tmp_path / "site")])
    assert code == 2
    assert "no rendered card for draft" in err and "hfrelease render" in err


def test_hub_addresses_follow_the_hub() -> None:
    """On a Hub page, repo links are that Hub's pages and relative paths the repo's files at the revision."""
    rewrite = hub_addresses("org/q", "abc123")
    assert rewrite("https://huggingface.co/org/ref") == "/org/ref"
    assert rewrite("plots/a.png") == "/org/q/resolve/abc123/plots/a.png"
    assert rewrite("https://example.org/x") == "https://example.org/x"
    assert rewrite("#usage") == "#usage"


def test_built_in_hub_serves_a_model_page(tmp_path: Path, isolated_hub_client: None) -> None:
    """`GET /<repo>` on the built-in Hub is the card at main: GFM table, metadata sidebar, files by commit."""
    import urllib.request

    from huggingface_hub import HfApi

    from hfrelease.hub import serve

    token = "hf_previewtest_0123456789abcdef"
    card = ("---\nlicense: mit\n---\n# Q\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n![p](plots/a.png) "
            "[r](https://huggingface.co/org/ref)\n\n<script>fetch('/api/whoami-v2')</script>\n")
    with serve(tmp_path / "hub", tokens=[token]) as hub:
        api = HfApi(endpoint=hub.url, token=token)
        api.create_repo("org/q")
        commit = api.upload_file(path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id="org/q")
        with urllib.request.urlopen(f"{hub.url}/org/q") as response:  # noqa: S310 - the local Hub
            page = response.read().decode()
            policy = response.headers["Content-Security-Policy"]
    assert "<table>" in page and "<dd>mit</dd>" in page
    assert "<script" not in page and "whoami" not in page  # a card's script never reaches the browser
    assert policy == PAGE_CSP and "default-src 'none'" in policy
    assert f'src="/org/q/resolve/{commit.oid}/plots/a.png"' in page and 'href="/org/ref"' in page


def test_served_preview_serves_the_pages_only_while_open(repo_root: Path) -> None:
    """`preview` without --out: each card's page is served at the yielded URL; after, no server, no pages."""
    import httpx

    from hfrelease.manifest import load_manifest
    from hfrelease.preview import card_urls, read_preview, served_preview

    site = read_preview(load_manifest(repo_root / "model_cards" / "demo", check_files=False))
    with served_preview(site) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        for page in card_urls(url, site):
            response = httpx.get(page, timeout=10)
            assert response.status_code == 200 and "<html" in response.text.lower()
            assert response.headers["content-security-policy"] == PAGE_CSP
    with pytest.raises(httpx.TransportError):  # refused: the server is closed
        httpx.get(card_urls(url, site)[0], timeout=2)
