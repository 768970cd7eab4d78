"""BibTeX and CITATION.cff for a card, built as data and escaped for their formats.

BibTeX: one `@misc` entry for the artifact (its `[artifact.citation]`, else one made from the family's:
its own key, title and repo) and one for the family. CFF: a CITATION.cff 1.2.0 document
(https://citation-file-format.github.io/), dumped by PyYAML, whose preferred citation is that same
artifact entry, so the two files cite the same thing. Untrusted text is escaped for (La)TeX; an author's
`bibtex` form is kept as written when its braces balance (it is meant to hold TeX such as
`Pe{\\v{c}}iukonis`), else escaped like any other text. An organisation (`entity = true`) is a CFF
entity (`name`) and a double-braced BibTeX name, so neither splits it into given and family names.
A URL is only written for a repo that exists (published, or the base model or a Hub source).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from hfrelease.cards.text import hub_url, strip_invisible
from hfrelease.manifest import Artifact, Manifest
from hfrelease.manifest.model import Author, Citation

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "%": r"\%", "&": r"\&", "#": r"\#",
                "$": r"\$", "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_TEX = re.compile("|".join(re.escape(c) for c in _TEX_SPECIAL))
# SPDX ids of the Hub license ids people use most; another license is left out of CITATION.cff rather
# than written in a form the CFF schema refuses.
_SPDX = {"apache-2.0": "Apache-2.0", "mit": "MIT", "bsd-3-clause": "BSD-3-Clause", "bsd-2-clause": "BSD-2-Clause",
         "cc-by-4.0": "CC-BY-4.0", "cc-by-sa-4.0": "CC-BY-SA-4.0", "cc-by-nc-4.0": "CC-BY-NC-4.0",
         "gpl-3.0": "GPL-3.0-only", "lgpl-3.0": "LGPL-3.0-only", "agpl-3.0": "AGPL-3.0-only", "mpl-2.0": "MPL-2.0",
         "unlicense": "Unlicense", "cc0-1.0": "CC0-1.0", "openrail": None, "other": None}
_ORCID = re.compile(r"^(https://orcid\.org/)?([0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X])$")


def tex(text: str) -> str:
    """Literal text for a BibTeX field value: TeX specials escaped, one line."""
    return _TEX.sub(lambda m: _TEX_SPECIAL[m.group(0)], " ".join(strip_invisible(text).split()))


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0 and "\n" not in text and "@" not in text


def _bib_author(author: Author) -> str:
    if author.bibtex and _balanced(author.bibtex):
        return strip_invisible(author.bibtex)
    # Braces make BibTeX take an organisation's name as one last name ("{hfrelease developers}").
    return f"{{{tex(author.name)}}}" if author.entity else tex(author.name)


def _entry(manifest: Manifest, cite: Citation, url: str | None) -> str:
    fields = [
        ("author", " and ".join(_bib_author(a) for a in manifest.family.authors)),
        ("title", tex(cite.title)),
        ("year", str(cite.year)),
        ("howpublished", "Hugging Face"),
    ]
    if url:
        fields.append(("url", tex(url).replace(r"\_", "_").replace(r"\%", "%").replace(r"\#", "#")))
    if cite.note:
        fields.append(("note", tex(cite.note)))
    body = ",\n".join(f"  {name:<12} = {{{value}}}" for name, value in fields)
    return f"@misc{{{cite.key},\n{body}\n}}"


def published_url(manifest: Manifest, artifact: Artifact) -> str | None:
    """The Hub page of the artifact's repo when it exists for readers, else None (never a dead link)."""
    sources = {a.source.hub for a in manifest.artifact if a.source.hub} | {manifest.family.base_model}
    return hub_url(artifact.repo) if artifact.publish or artifact.repo in sources else None


def citations(manifest: Manifest, artifact: Artifact) -> list[tuple[Citation, str | None]]:
    """(citation, url) pairs of a card: the artifact's own first (declared, or made from the family's:
    `<family key>-<artifact id>`, the artifact's title), then the family's."""
    family = manifest.family.citation
    url = published_url(manifest, artifact)
    own = artifact.citation or Citation(key=f"{family.key}-{artifact.id}",
                                        title=artifact.title or artifact.repo.split("/")[1], year=family.year)
    return [(own, own.url or url or family.url), (family, family.url)]


def bibtex(manifest: Manifest, artifact: Artifact) -> str:
    """The card's BibTeX: the artifact's entry (if any) and the family's."""
    return "\n\n".join(_entry(manifest, cite, url) for cite, url in citations(manifest, artifact)) + "\n"


def _cff_person(author: Author) -> dict[str, Any]:
    name = " ".join(strip_invisible(author.name).split())
    given, _, family = name.rpartition(" ")
    person: dict[str, Any] = ({"family-names": family, "given-names": given} if given and not author.entity
                              else {"name": name})
    if author.handle:
        person["alias"] = author.handle
    if author.orcid:
        match = _ORCID.match(author.orcid)
        if match:
            person["orcid"] = f"https://orcid.org/{match.group(2)}"
    return person


def cff(manifest: Manifest, artifact: Artifact) -> str:
    """CITATION.cff (CFF 1.2.0) for the artifact, its preferred citation the card's first BibTeX entry."""
    cite, url = citations(manifest, artifact)[0]
    family = manifest.family
    authors = [_cff_person(a) for a in family.authors]
    data: dict[str, Any] = {
        "cff-version": "1.2.0",
        "message": "If you use this model, please cite it as below.",
        "title": strip_invisible(artifact.title or artifact.repo),
        "authors": authors,
        "version": family.version,
        # A model repo holds the artifact itself: CFF's repository-artifact, not repository-code.
        "repository-artifact": published_url(manifest, artifact),
        "url": published_url(manifest, artifact),
        "keywords": [strip_invisible(t) for t in family.tags] or None,
        "license": _SPDX.get(family.license),
        "abstract": strip_invisible(artifact.description) if artifact.description else None,
        "preferred-citation": {
            "type": "generic",
            "title": strip_invisible(cite.title),
            "authors": authors,
            "year": cite.year,
            "url": url,
            "notes": strip_invisible(cite.note) if cite.note else None,
            "publisher": {"name": "Hugging Face"},
        },
    }
    data["preferred-citation"] = {k: v for k, v in data["preferred-citation"].items() if v is not None}
    clean = {k: v for k, v in data.items() if v is not None}
    return str(yaml.safe_dump(clean, sort_keys=False, allow_unicode=True, width=1000))
