"""The Jinja environment cards are rendered in: sandboxed, strict, Markdown-escaping, confined loader.

- `SandboxedEnvironment`: a family may override partials from `model_cards/<family>/templates/`; a
  template there must not reach Python internals (`''.__class__.__mro__`), nor work without bound
  (`hfrelease.cards.template_bounds`).
- `StrictUndefined`: a value the context lacks is an error naming it, never an empty cell.
- `finalize`: every printed value that is not `Markdown` is escaped (autoescape for Markdown), and a
  printed `None` is an error: it is always a context bug, never something to show a reader.
- The loader refuses names with `..`, absolute paths, backslashes, and files (or links) outside its
  directories: a template name cannot escape the template directories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from jinja2 import BaseLoader, Environment, StrictUndefined, TemplateNotFound

from hfrelease.cards.errors import CardError
from hfrelease.cards.template_bounds import BoundedSandbox
from hfrelease.cards.text import escape_markdown
from hfrelease.resources import templates_dir

CARD_TEMPLATES = "cards"  # the card templates' folder inside templates/


class ConfinedLoader(BaseLoader):
    """Templates from `roots`, first match wins; no name resolves outside them."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [root.resolve() for root in roots]

    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        parts = template.split("/")
        if (not template or template.startswith("/") or "\\" in template or "\x00" in template
                or any(part in {"", ".", ".."} for part in parts)):
            raise TemplateNotFound(template)
        for root in self.roots:
            path = root.joinpath(*parts)
            if not path.is_file():
                continue
            if not path.resolve().is_relative_to(root):
                raise TemplateNotFound(template)  # a symbolic link leading out of the template directory
            source = path.read_text(encoding="utf-8")
            mtime = path.stat().st_mtime
            return source, str(path), lambda p=path, m=mtime: p.stat().st_mtime == m
        raise TemplateNotFound(template)


def _finalize(value: object) -> object:
    if value is None:
        raise CardError("a card template printed an empty value (None)",
                        hint="Guard optional values with {% if ... %} in the template.")
    return escape_markdown(value)


def card_environment(family_templates: Path | None = None) -> BoundedSandbox:
    """The environment of a family's cards: its own overrides first, then hfrelease's templates."""
    roots = [templates_dir() / CARD_TEMPLATES]
    if family_templates is not None and family_templates.is_dir():
        roots.insert(0, family_templates)
    return BoundedSandbox(
        loader=ConfinedLoader(roots), undefined=StrictUndefined, autoescape=False, finalize=_finalize,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
