"""huggingface_hub's own output switched by hfrelease: its tqdm bars off only while asked, its request log."""

from __future__ import annotations

import logging

import pytest
from huggingface_hub.utils import (  # type: ignore[attr-defined]
    are_progress_bars_disabled,
    disable_progress_bars,
    enable_progress_bars,
)

from hfrelease.hub_client import log_requests, progress_bars_off

pytestmark = pytest.mark.unit


def test_bars_are_off_inside_and_back_on_after_even_on_an_error() -> None:
    """On before: off inside the block, on again after it, also when the block raised."""
    enable_progress_bars()
    with progress_bars_off():
        assert are_progress_bars_disabled()
    assert not are_progress_bars_disabled()
    with pytest.raises(KeyboardInterrupt), progress_bars_off():
        raise KeyboardInterrupt
    assert not are_progress_bars_disabled()


def test_bars_someone_else_turned_off_stay_off() -> None:
    """Off before (HF_HUB_DISABLE_PROGRESS_BARS, another caller): still off after the block."""
    disable_progress_bars()
    try:
        with progress_bars_off():
            assert are_progress_bars_disabled()
        assert are_progress_bars_disabled()
    finally:
        enable_progress_bars()


def test_log_requests_turns_on_huggingface_hubs_debug_log() -> None:
    """-vv: huggingface_hub's logger at DEBUG (its records of requests carry <TOKEN>, never the token)."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    try:
        log_requests()
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(level)
