"""`hfrelease publish` judges the recorded gates first: a failed one refuses the release unless allowed.

The family's ledger holds what `hfrelease eval` would have recorded: the reference scores 1.0 on every
sample, q1 as well, q0 0.0 (a regression far past the margin). The release job stops on that; a plain
`hfrelease publish` afterwards must too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hfrelease.hub import HubServer
from hfrelease.ledger.record import LedgerRecord, Metric, Sample, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from tests.conftest import CliRun
from tests.publish_family import TOKEN, make_family

Q0, Q1 = "alice/Tiny-1M-Q0", "alice/Tiny-1M-Q1"
HARNESS = {"vllm": "0.0.0-eval-runner", "lm_eval": "0.0.0-eval-runner"}  # records made on another machine
GATE = """
[[gate]]
id = "quality"
label = "Quality"
command = ["python", "gate.py"]
mode = "non-thinking"
max_tokens = 16
metric = "score"
margin = 0.05
"""


def _record_gates(family: Path, scores: dict[str, float], *, when: str = "2026-11-30T09:00:00Z") -> None:
    """Write each artifact's gate record keyed exactly as `hfrelease eval` keys it (20 samples of `score`)."""
    from hfrelease.evaluation.plan import gate_input_key, plan_eval

    manifest = load_manifest(family)
    ledger = Ledger(family / "results")
    (gate,) = manifest.gate
    for job in plan_eval(manifest, ledger=ledger, hash_cache=None, download=False).servers:
        assert job.content is not None
        score, n = scores[job.artifact.id], 20
        key = gate_input_key(manifest, gate, content_sha256=job.content.sha256, public=job.public, harness=HARNESS)
        ledger.write(LedgerRecord(
            kind="gate", family=manifest.family.name, artifact_id=job.artifact.id, artifact_hash=job.content.sha256,
            artifact_files=(), subject_id=gate.id, harness="custom", task=gate.id, task_hash=None, mode=gate.mode,
            n=n, seed=gate.seed, generation={"max_tokens": gate.max_tokens},
            metrics={gate.metric: Metric(value=score, stderr=0.0)},
            samples=tuple(Sample(doc_id=str(i), score=score, truncated=False, empty=False) for i in range(n)),
            truncated=0, empty=0, serve=ServeRecord(argv=job.public.argv, env={}, display=job.public.display()),
            versions=dict(HARNESS), hardware={"cpu_count": 2}, started_at=when, duration_s=1.0,
            input_key=key, extra={"metric": gate.metric, "value": score},
        ))  # fmt: skip


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A two-quant family with one custom gate and no plugin (its check runs pip), a token in HF_TOKEN."""
    family = make_family(tmp_path / "family")
    (family / "gate.py").write_text("print('a custom gate')\n")
    toml = family / "release.toml"
    toml.write_text(toml.read_text().replace('[serve]\nplugin = "vllm_plugin"\n', "") + GATE)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return family


def test_publish_after_a_failed_gate_is_refused_before_anything_is_uploaded(
    gated: Path, hub: HubServer, api: HfApi, cli: CliRun
) -> None:
    """q0 failed its recorded gate: exit 4 naming it, and the Hub never sees a repo, a byte or a tag."""
    _record_gates(gated, {"ref": 1.0, "q0": 0.0, "q1": 1.0})
    code, _, err = cli(["publish", str(gated), "--hub", hub.url])
    assert code == 4, err
    assert "publish refused" in err and "q0: Quality: fail" in err and "--allow-failed-gates" in err
    assert "q1:" not in err
    assert not api.repo_exists(Q0) and not api.repo_exists(Q1)
    assert hub.stats()["lfs_bytes_received"] == 0


def test_only_the_artifacts_being_published_are_judged(gated: Path, hub: HubServer, api: HfApi, cli: CliRun) -> None:
    """`--artifact q1` publishes q1, which passed, though q0 failed: the refusal is per artifact."""
    _record_gates(gated, {"ref": 1.0, "q0": 0.0, "q1": 1.0})
    code, _, err = cli(["publish", str(gated), "--hub", hub.url, "--artifact", "q1"])
    assert code == 0, err
    assert api.repo_exists(Q1) and not api.repo_exists(Q0)


def test_allow_failed_gates_publishes_and_the_commit_names_the_gates(
    gated: Path, hub: HubServer, api: HfApi, cli: CliRun
) -> None:
    """With --allow-failed-gates the family is published; q0's release commit and tag name its failed gate."""
    _record_gates(gated, {"ref": 1.0, "q0": 0.0, "q1": 1.0})
    code, out, err = cli(["publish", str(gated), "--hub", hub.url, "--allow-failed-gates", "--json"])
    assert code == 0, err
    report = json.loads(out)
    assert [(g["artifact"], g["gate"], g["verdict"]) for g in report["failed_gates_allowed"]] == [
        ("q0", "quality", "fail")]
    release = api.list_repo_commits(Q0)[0]
    assert "--allow-failed-gates" in release.title
    assert "q0: Quality: fail" in release.message
    assert "--allow-failed-gates" not in api.list_repo_commits(Q1)[0].title  # q1 passed: nothing to say
    assert [t.name for t in api.list_repo_refs(Q0).tags] == ["v1.0"]


def test_gates_without_a_record_do_not_stop_publish(gated: Path, hub: HubServer, api: HfApi, cli: CliRun) -> None:
    """A family never evaluated on this machine publishes: only recorded results are judged here."""
    code, _, err = cli(["publish", str(gated), "--hub", hub.url])
    assert code == 0, err
    assert api.repo_exists(Q0) and api.repo_exists(Q1)


def test_the_release_publish_job_publishes_verifies_and_refuses_failed_gates_too(
    gated: Path, hub: HubServer, api: HfApi, cli: CliRun, tmp_path: Path
) -> None:
    """`release --only publish` (the workflow's publish step) refuses a failed gate; passing, it verifies."""
    _record_gates(gated, {"ref": 1.0, "q0": 0.0, "q1": 1.0})
    work = ["--work", str(tmp_path / "work")]
    code, _, err = cli(["release", str(gated), "--only", "publish", "--hub", hub.url, *work])
    assert code == 4, err
    assert not api.repo_exists(Q0)
    # q0 re-evaluated later: its newest record passes.
    _record_gates(gated, {"ref": 1.0, "q0": 1.0, "q1": 1.0}, when="2026-11-30T10:00:00Z")
    code, _, err = cli(["release", str(gated), "--only", "publish", "--hub", hub.url, *work])
    assert code == 0, err
    assert "2 repo(s) downloaded back and verified" in err
