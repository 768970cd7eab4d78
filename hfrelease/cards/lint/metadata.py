"""The lint's metadata rules, on what the Hub reads: the front matter parses and has the required keys, an
explicit base-model relation, Hub-style metric ids on the scale the body prints, the right library,
`.eval_results` in the Hub's schema, and citation files that agree and name organisations as organisations.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard

from hfrelease.cards.card_text import CardText, provenance_table
from hfrelease.cards.frontmatter import REQUIRED_KEYS
from hfrelease.manifest import Manifest


def front_matter(manifest: Manifest, card: CardText) -> list[str]:
    """The front matter parses (huggingface_hub's own parser) and has the keys the Hub and this release need."""
    where = str(card.path)
    if not card.text.startswith("---\n"):
        return [f"{where}: no YAML front matter"]
    try:
        data: dict[str, Any] = ModelCard(card.text, ignore_metadata_errors=False).data.to_dict()  # type: ignore[no-untyped-call]
    except Exception as exc:  # huggingface_hub raises ValueError or yaml errors; either way it is unusable
        return [f"{where}: front matter does not parse: {exc}"]
    problems = [f"{where}: front matter lacks {key!r}" for key in REQUIRED_KEYS if not data.get(key)]
    artifact = manifest.artifact_by_id(card.artifact_id)
    if artifact.kind != "reference" and not data.get("base_model"):
        problems.append(f"{where}: front matter lacks 'base_model'")
    if artifact.kind == "quant" and data.get("base_model_relation") != "quantized":
        problems.append(f"{where}: a quant's base_model_relation must be 'quantized'")
    return problems


_EVAL_KEYS = {"dataset", "value", "date", "source", "notes", "verifyToken"}
_EVAL_DATASET_KEYS = {"id", "task_id", "revision"}


def metadata(manifest: Manifest, card: CardText, body: str) -> list[str]:
    """What the Hub reads: an explicit base-model relation, Hub-style metric ids on the body's scale, the
    right library, `.eval_results` in the documented schema, and citations that agree and name
    organisations as organisations."""
    import yaml

    where, problems = str(card.path), []
    artifact = manifest.artifact_by_id(card.artifact_id)
    try:
        data: dict[str, Any] = ModelCard(card.text, ignore_metadata_errors=False).data.to_dict()  # type: ignore[no-untyped-call]
    except Exception:  # reported by front_matter
        return []
    if data.get("base_model") and not data.get("base_model_relation"):
        problems.append(f"{where}: base_model without base_model_relation: the Hub would guess the relation")
    if artifact.draft is not None and artifact.draft.method in {"eagle", "eagle3", "mtp"} \
            and data.get("library_name") == "transformers":
        problems.append(f"{where}: library_name transformers on a {artifact.draft.method} head, which transformers "
                        "cannot load on its own")
    shown = {value for number_id, (value, _) in provenance_table(body).items()
             if number_id.startswith("gate.") and number_id.endswith(f".{artifact.id}.value")}
    for index in data.get("model-index") or []:
        for result in index.get("results", []):
            for metric in result.get("metrics", []):
                if "," in str(metric.get("type", "")):
                    problems.append(f"{where}: model-index metric type {metric['type']!r} is an lm-eval key, "
                                    "not a Hub metric id")
                if not _on_scale(metric.get("value"), shown, points="percentages for metrics in [0, 1]" in body):
                    problems.append(f"{where}: model-index value {metric.get('value')!r} is not on the scale the "
                                    "card's tables print")
    directory = card.path.parent
    for path in sorted((directory / ".eval_results").glob("*.yaml")):
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, dict) or set(entry) - _EVAL_KEYS or not isinstance(entry.get("dataset"), dict) \
                    or set(entry["dataset"]) - _EVAL_DATASET_KEYS or "id" not in entry["dataset"] \
                    or not isinstance(entry.get("value"), int | float):
                problems.append(f"{path}: not the Hub's .eval_results schema (dataset.id, task_id, value, date, "
                                "source, notes)")
            elif not _on_scale(entry["value"], shown, points="percentages for metrics in [0, 1]" in body):
                problems.append(f"{path}: value {entry['value']!r} is not on the scale the card's tables print")
    problems += _citation_files(manifest, directory)
    return problems


def _on_scale(value: object, shown: set[str], *, points: bool) -> bool:
    """Whether a metadata value is one the card's tables print (its provenance values); without them, a
    fraction on a card that prints points is off the scale."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    if not shown:
        return not (points and 0.0 <= value <= 1.0)
    return any(abs(float(text) - value) < 0.051 for text in shown if re.fullmatch(r"-?\d+(\.\d+)?", text))


def _citation_files(manifest: Manifest, directory: Path) -> list[str]:
    """CITATION.cff and citation.bib cite the same work, organisations stay one name, no dead repo link."""
    import yaml

    cff_path, bib_path = directory / "CITATION.cff", directory / "citation.bib"
    if not cff_path.is_file() or not bib_path.is_file():
        return []
    problems = []
    cff = yaml.safe_load(cff_path.read_text(encoding="utf-8"))
    bib = bib_path.read_text(encoding="utf-8")
    first = bib.split("\n\n@", 1)[0]
    fields = dict(re.findall(r"^\s+(\w+)\s+= \{(.*)\},?$", first, re.M))
    preferred = cff.get("preferred-citation", {}) if isinstance(cff, dict) else {}
    if isinstance(cff, dict) and preferred.get("url") != cff.get("url") \
            and not str(preferred.get("title", "")).startswith(str(cff.get("title"))):
        problems.append(f"{cff_path}: describes {cff.get('title')!r} but its preferred citation is "
                        f"{preferred.get('title')!r}: each artifact is cited as itself")
    if preferred.get("title") != fields.get("title") or preferred.get("url") != fields.get("url"):
        problems.append(f"{cff_path}: cites {preferred.get('title')!r} ({preferred.get('url')}) but citation.bib's "
                        f"first entry cites {fields.get('title')!r} ({fields.get('url')})")
    for author in manifest.family.authors:
        if not author.entity:
            continue
        people = cff.get("authors", []) if isinstance(cff, dict) else []
        if not any(isinstance(p, dict) and p.get("name") == author.name for p in people):
            problems.append(f"{cff_path}: the organisation {author.name!r} is not a CFF entity (name), "
                            "it reads as a person")
        if f"{{{{{author.name}}}}}" not in bib:
            problems.append(f"{bib_path}: the organisation {author.name!r} is not braced: BibTeX splits it")
    sources = {a.source.hub for a in manifest.artifact if a.source.hub} | {manifest.family.base_model}
    dead = {f"https://huggingface.co/{a.repo}" for a in manifest.artifact if not a.publish and a.repo not in sources}
    text = cff_path.read_text(encoding="utf-8") + bib
    problems += [f"{directory}: the citation links {url}, a repo this release never publishes" for url in sorted(dead)
                 if re.search(re.escape(url) + r"(?![\w-])", text)]
    return problems
