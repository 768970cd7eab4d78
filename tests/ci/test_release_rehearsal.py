"""`hfrelease release --hub local`: the workflow's job graph end to end on the demo family (real vLLM, lm-eval, Hub)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from hfrelease.ledger.store import Ledger
from hfrelease.rehearsal import rehearse

pytestmark = pytest.mark.slow

ARTIFACTS = ("reference", "fp8-dynamic")
GATES = ("arith-nothink", "mc")


@pytest.fixture
def vllm_env(tmp_path: Path) -> Iterator[None]:
    """vLLM on the CPU with its caches in the test's temp dir (as tests/integration's session fixture does)."""
    previous = dict(os.environ)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    os.environ["HFRELEASE_CACHE"] = str(tmp_path / "hfrelease-cache")
    yield
    os.environ.clear()
    os.environ.update(previous)


def _two_artifact_family(family: Path) -> None:
    """Cut the demo manifest down to two artifacts and their two fastest gates (two servers: ~2 min on 2 cores)."""
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    data["artifact"] = [a for a in data["artifact"] if a["id"] in ARTIFACTS]
    # 40 samples instead of 100: the two servers' start-up, not the requests, is then most of the time.
    data["gate"] = [{**g, "limit": 40} for g in data["gate"] if g["id"] in GATES]
    data["speculative"] = [s for s in data["speculative"] if "draft" not in s]
    data["workload"] = []
    path.write_text(tomli_w.dumps(data))


def test_rehearsal_runs_the_release_job_graph(demo_family: Path, tmp_path: Path, vllm_env: None) -> None:
    """check -> eval per artifact (own dirs, own ledgers) -> merge -> render -> publish -> verify, summary written."""
    _two_artifact_family(demo_family)
    summary = tmp_path / "step-summary.md"
    work = tmp_path / "work"
    report = rehearse(demo_family, work_dir=work, hub="local", tag="v0.1", artifacts=ARTIFACTS, gates=GATES,
                      env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert report.error is None, report.error.message if report.error else ""
    assert [(j.name, j.status) for j in report.jobs] == [
        ("check", "success"), ("eval (reference)", "success"), ("eval (fp8-dynamic)", "success"),
        ("merge", "success"), ("render", "success"), ("publish", "success")]

    # Each matrix job recorded into its own ledger copy, in its own directory, only its own artifact.
    for artifact in ARTIFACTS:
        job_ledger = Ledger(work / f"eval-{artifact}" / "results")
        assert {r.artifact_id for r in job_ledger.records(kind="gate")} == {artifact}
        assert (work / f"eval-{artifact}" / "runs" / f"{artifact}.server.log").is_file()
    # The merge joined them; the gates were judged on the merged ledger.
    merged = Ledger(demo_family / "results").records(kind="gate")
    assert sorted((r.artifact_id, r.subject_id) for r in merged) == sorted(
        (a, g) for a in ARTIFACTS for g in GATES)
    verdicts = {(r.artifact_id, r.gate_id): r.verdict for r in report.rows}
    assert verdicts == {**{("reference", g): "reference" for g in GATES}, **{("fp8-dynamic", g): "pass" for g in GATES}}

    # Cards rendered from the merged ledger; the family published to the built-in Hub and read back.
    for artifact in ARTIFACTS:
        assert (demo_family / artifact / "README.md").is_file()
    assert report.publish is not None and report.publish.outcome is not None
    assert report.publish.outcome.tag == "v0.1"
    assert {v.artifact_id for v in report.verified} == set(ARTIFACTS)
    assert (work / "hub").is_dir()

    text = summary.read_text()
    assert text.startswith("## Release demo v0.1: published")
    assert "| eval (fp8-dynamic) | ✅ success |" in text
    assert "| fp8-dynamic | Arithmetic |" in text
    assert "hfrelease-demo/tiny-FP8-Dynamic" in text
