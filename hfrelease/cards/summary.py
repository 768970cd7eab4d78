"""What a summary of a card's sections reads (the headline, the choice table): the card's view and its
section builders, which share one number registry, so a figure a summary repeats is the same number."""

from __future__ import annotations

from hfrelease.cards.draft_tables import DraftTables
from hfrelease.cards.quality_tables import QualityTables
from hfrelease.cards.speed_tables import SpeedTables
from hfrelease.cards.view import CardView


class Summary:
    """The view and the section builders of one card, for a part of it that summarises them."""

    def __init__(self, view: CardView, quality: QualityTables, speed: SpeedTables, drafts: DraftTables) -> None:
        self.view = view
        self.quality = quality
        self.speed = speed
        self.drafts = drafts
        self.manifest = view.manifest
        self.measured = view.measured
        self.numbers = view.numbers
        self.sections = view.sections
