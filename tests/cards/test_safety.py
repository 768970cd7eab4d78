"""Untrusted manifest and ledger text ends up literal or escaped; template names cannot escape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from huggingface_hub import ModelCard
from jinja2 import Environment, TemplateNotFound

from hfrelease.cards import CardError, CardInputs, render_family
from hfrelease.cards.environment import ConfinedLoader, card_environment
from hfrelease.cards.text import code_block, escape_markdown, link

PAYLOADS = {
    "template": ("{{7*7}}", "\\{\\{7\\*7\\}\\}"),
    "script": ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    "front matter break": ("---\nlicense: evil", "\\---"),
    "table break": ("a | b", "a \\| b"),
    "link": ("[click](javascript:alert(1))", "\\[click\\](javascript:alert(1))"),
    "bidi": ("admin\u202e\u2066txt", "admintxt"),
    "heading": ("# Owned", "\\# Owned"),
}


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_escape_table(name: str) -> None:
    """Each payload is escaped to inert text."""
    payload, expected = PAYLOADS[name]
    assert expected in escape_markdown(payload)


def test_links_only_https() -> None:
    """A javascript: (or any non-https) URL never becomes a link."""
    assert link("x", "javascript:alert(1)") == "x"
    assert link("x", "https://huggingface.co/a/b\u202e") == "x"
    assert link("x", "https://huggingface.co/a/b") == "[x](https://huggingface.co/a/b)"


def test_code_block_fence_cannot_be_closed() -> None:
    """A command containing ``` cannot close its fence early."""
    block = code_block("echo\n```\n# not a heading")
    assert block.startswith("````") and block.endswith("````")


def test_injected_manifest_renders_inert(demo_inputs: CardInputs) -> None:
    """Payloads in a manifest's title, description, tags and gate label stay literal in card and front matter."""
    manifest = demo_inputs.manifest
    evil = "{{7*7}} <script>x</script> [a](javascript:alert(1)) \u202eevil\n---\nlicense: mit"
    artifacts = [a.model_copy(update={"title": evil, "description": evil}) if a.id == "fp8-dynamic" else a
                 for a in manifest.artifact]
    gates = [g.model_copy(update={"label": evil}) for g in manifest.gate]
    family = manifest.family.model_copy(update={"tags": [evil, "ok"], "display_name": evil})
    bad = manifest.model_copy(update={"artifact": artifacts, "gate": gates, "family": family})
    inputs = CardInputs(manifest=bad, records=demo_inputs.records, sections=demo_inputs.sections)
    card = render_family(inputs, plots=False, artifacts=["fp8-dynamic"]).cards[0]
    text = card.readme
    body = text.split("\n---\n", 1)[1]
    # The artifact's citation quotes its title verbatim inside a fenced bibtex block, which no title can close
    # (code_block): literal text there. Everywhere else it must be escaped.
    prose = re.sub(r"^(`{3,})bibtex\n.*?^\1$", "", body, flags=re.S | re.M)
    assert "<script>" not in prose and "\\{\\{7\\*7\\}\\}" in body
    assert not re.search(r"(?<![\w.])49(?![\w.])", body)  # the template expression was never evaluated
    assert "\u202e" not in text and not re.search(r"(?<!\\)\]\(javascript:", prose)
    assert "\n---\nlicense: mit" not in body
    data = ModelCard(text).data
    assert data.license == "apache-2.0" and " ".join(evil.replace("\u202e", "").split()) in (data.tags or [])
    assert "{{7*7}}" not in card.files["CITATION.cff"].decode().split("title:")[0]


@pytest.mark.parametrize("name", ["../secrets.j2", "/etc/passwd", "partials/../../x.j2", "partials\\x.j2", "", "a//b"])
def test_loader_refuses_escaping_names(tmp_path: Path, name: str) -> None:
    """Template names with .., absolute paths or backslashes are not found, whatever exists on disk."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "secrets.j2").write_text("secret")
    loader = ConfinedLoader([tmp_path / "inner"])
    with pytest.raises(TemplateNotFound):
        loader.get_source(Environment(autoescape=True), name)


def test_loader_refuses_symlink_out(tmp_path: Path) -> None:
    """A template that is a symbolic link leading out of the template directory is refused."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "secret.j2").write_text("secret")
    (tmp_path / "inner" / "link.j2").symlink_to(tmp_path / "secret.j2")
    with pytest.raises(TemplateNotFound):
        ConfinedLoader([tmp_path / "inner"]).get_source(Environment(autoescape=True), "link.j2")


def test_sandbox_blocks_python_internals(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """A family override cannot reach Python internals: the sandbox stops it and the render fails."""
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "limitations.md.j2").write_text(
        "{{ ''.__class__.__mro__[1].__subclasses__() }}\n")
    with pytest.raises(CardError):
        render_family(demo_inputs, plots=False, environment=card_environment(tmp_path))
