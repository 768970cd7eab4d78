"""What every section of one card shares: the manifest, the measurements, the card's number registry, and
which of the family's artifacts the card shows and links.

The section builders (`quality_tables.py`, `speed_tables.py`, `draft_tables.py`, `headline.py`,
`choose_table.py`) each hold a `CardView`; a number they format is registered in its registry as it is
formatted, so the card's number provenance lists them in the order the card prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hfrelease.cards.measurements import FamilyMeasurements, SpeedPoint
from hfrelease.cards.numbers import NumberRegistry, binary_size
from hfrelease.cards.text import Markdown, escape_markdown, hub_url, link
from hfrelease.manifest import Artifact, Manifest

Context = dict[str, Any]


class CardView:
    """One card's view of the family: which artifacts it shows, how it names them, its registry."""

    def __init__(self, manifest: Manifest, measured: FamilyMeasurements, numbers: NumberRegistry,
                 artifact: Artifact, sections: Mapping[str, Mapping[str, str]]) -> None:
        self.manifest = manifest
        self.sections = sections
        self.measured = measured
        self.numbers = numbers
        self.card = artifact

    def shown(self, other: Artifact) -> bool:
        """Whether `other` appears in this card's family tables: a published card leaves out the artifacts
        the release does not publish (regression fixtures), which readers could neither download nor use."""
        return (other.publish or repo_exists(self.manifest, other) or not self.card.publish
                or other.id == self.card.id)

    def shown_point(self, p: SpeedPoint) -> bool:
        """Whether a speed point's draft (if any) is one this card shows."""
        draft = p.entry.record.draft_artifact_id
        return draft is None or self.shown(self.manifest.artifact_by_id(draft))

    def name(self, other: Artifact, *, short: bool = False) -> Markdown:
        """An artifact's title (`short`: its repo's name, for the narrow family table), linked to its Hub
        repo only when that repo exists (published by this release, or the base model or a Hub source)."""
        title = other.repo.split("/")[1] if short else (other.title or other.repo)
        return link(title, hub_url(other.repo)) if repo_exists(self.manifest, other) else escape_markdown(title)

    def size(self, artifact: Artifact) -> Markdown | None:
        """The size of `artifact`'s weights in binary units, or None when it was not measured."""
        found = self.measured.sizes.get(artifact.id)
        if found is None:
            return None
        value, unit = binary_size(found[0])
        text = self.numbers.add(f"size.{artifact.id}", f"weights of {artifact.id} ({unit})", value, [found[1]])
        return Markdown(f"{text} {unit}")


def repo_exists(manifest: Manifest, artifact: Artifact) -> bool:
    """Whether `artifact`'s Hub repo exists for readers: this release publishes it, or it is the family's
    base model or a Hub source (someone else published it). A link to any other repo would be dead."""
    sources = {a.source.hub for a in manifest.artifact if a.source.hub}
    return artifact.publish or artifact.repo == manifest.family.base_model or artifact.repo in sources
