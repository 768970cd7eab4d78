"""The demo build's Hub, served for a benchmark: the demo's reference and draft are vendor repos pinned there,
as a maintainer's sources are pinned on the Hub, so a benchmark measures the path a release takes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def serve_demo_hub(work: Path) -> str:
    """Serve a copy of build/demo's Hub under `work` (the original stays untouched) for the rest of the process,
    and point huggingface_hub at it: this process's constants and the environment its children inherit."""
    from huggingface_hub import constants

    from hfrelease.demo.vendor import HUB_DIR
    from hfrelease.hub import serve

    shutil.copytree(ROOT / "build" / "demo" / HUB_DIR, work / "hub")
    hub = serve(work / "hub")
    os.environ.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(work / "hf-cache"))
    constants.ENDPOINT, constants.HF_HUB_CACHE = hub.url, str(work / "hf-cache")
    constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    return str(hub.url)
