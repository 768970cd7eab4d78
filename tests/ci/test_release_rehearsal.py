"""`hfrelease release --hub local`: the demo family released through its workflow file (real vLLM, lm-eval, Hub)."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w

from hfrelease.ci.rehearsal import rehearse, write_release_workflow
from hfrelease.demo.vendor import DRAFT_REPO, read_pins
from hfrelease.files.sources import hub_content_hash
from hfrelease.ledger.store import Ledger
from hfrelease.publish import LOCAL, open_hub

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# The int8 quant, not the FP8 one: on an Intel Xeon with AMX torch sends FP8 `_scaled_mm` to oneDNN, whose only
# FP8 matmul there is its reference implementation ("ref:any"): the FP8 quant served 2.4 tokens/s against the
# int8 quant's 380 (README, "The FP8 quant on an Intel Xeon with AMX"), and this test is about the workflow.
GATED = ("reference", "w8a8-int8")
ARTIFACTS = (*GATED, "draft")
GATES = ("arith-nothink", "mc")
# The demo's tasks load no Hub Benchmark's dataset, so its cards have no `.eval_results/` (benchmarks are mapped
# by exact lm-eval task name: `cards.frontmatter.BENCHMARKS`). The artifact handoff of nested card folders is
# tested with the gates' Every Eval Ever records instead (`every_eval_ever/data/<gate>/...`): the
# multiple-choice gate runs a copy of its task on all of its 100 items.
BENCHMARK_TASK = "demo_mc_full"
REPOS = {"reference": "hfrelease-demo/tiny-reference", "w8a8-int8": "hfrelease-demo/tiny-W8A8-int8",
         "draft": "hfrelease-demo/tiny-draft"}


def _cut_down_family(family: Path) -> None:
    """The demo manifest cut to two gated artifacts with their two fastest gates, and the draft model's job.

    Four servers on 2 cores (~4 min): one per gated artifact; the draft's job serves its target with it and
    without it on one short workload.
    """
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    data["artifact"] = [a for a in data["artifact"] if a["id"] in ARTIFACTS]
    for artifact in data["artifact"]:
        if artifact["id"] == "draft":
            # The test is about the workflow, not this draft's quality: 8 prompts measure acceptance roughly.
            artifact["draft"]["min_acceptance_rate"] = 0.2
            # Nor about the draft x target matrix: it would serve the quants with the draft (and without it)
            # in the draft's job too, two more servers (~3 min on 2 cores); the demo run measures it.
            artifact["draft"].pop("matrix", None)
    # 40 samples instead of 100: the servers' start-up, not the requests, is then most of the time.
    data["gate"] = [{**g, "limit": 40} for g in data["gate"] if g["id"] in GATES]
    for gate in data["gate"]:
        if gate["id"] == "mc":
            del gate["limit"]
            gate.update(task=BENCHMARK_TASK, task_dir="../../tasks")
    data["speculative"] = [s for s in data["speculative"] if s["id"] == "draft"]
    data["workload"] = [{**w, "speculative": ["none", "draft"], "repeats": 1, "warmups": 1, "num_prompts": 8}
                        for w in data["workload"] if w["id"] == "chat"]
    path.write_text(tomli_w.dumps(data))


@pytest.fixture
def repository(demo_family: Path, tmp_path: Path) -> Path:
    """A repository holding the cut-down demo family and the release workflow rendered for it."""
    repo = tmp_path / "repo"
    shutil.copytree(demo_family, repo / "model_cards" / "demo")
    (repo / "build").symlink_to(ROOT / "build")  # the manifest's ../../build/demo paths resolve from the copy
    _cut_down_family(repo / "model_cards" / "demo")
    original = (ROOT / "build" / "demo" / "tasks" / "demo_mc.yaml").read_text()
    (repo / "tasks").mkdir()
    task = original.replace("task: demo_mc", f"task: {BENCHMARK_TASK}")
    (repo / "tasks" / f"{BENCHMARK_TASK}.yaml").write_text(task)
    write_release_workflow(repo / "model_cards" / "demo", root=repo)
    return repo


def test_the_demo_family_is_released_through_its_workflow_file(repository: Path, tmp_path: Path) -> None:
    """check -> eval matrix -> merge -> render -> publish run from release.yml; the repos hold every card file."""
    summary = tmp_path / "step-summary.md"
    work = tmp_path / "work"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "HFRELEASE_CACHE": str(tmp_path / "cache"),
           "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
           "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    # The jobs' Hub starts with the vendor's uploads the manifest pins: the reference and the draft (see
    # `demo_family`).
    shutil.copytree(ROOT / "build" / "demo" / "hub", work / "hub")
    report = rehearse(repository / "model_cards" / "demo", work_dir=work, hub=LOCAL, tag="v0.1", env=env)
    assert report.error is None, report.error.message if report.error else ""
    assert [(j.id, j.name, j.status) for j in report.jobs] == [
        ("check", "check the manifest and the tag", "success"),
        ("eval", "eval reference", "success"), ("eval", "eval w8a8-int8", "success"),
        ("eval", "eval draft", "success"),
        ("merge", "merge the ledgers and judge the gates", "success"),
        ("render", "render the model cards", "success"),
        ("bundle", "bundle every repo", "success"),
        ("publish", "publish to the Hub and verify", "success")]
    # What did not run as written is named: checkout, setup-python and the pip installs, in every job.
    for job in report.jobs:
        substituted = job.substitutions()
        assert any("actions/checkout" in s for s in substituted), job.name
        assert any("not run" in s for s in substituted), job.name

    # Each eval job recorded only its own artifact, in its own workspace; the merge job saw every ledger.
    # Each also ran its speed anchors (`--speed --leave-drafts`): its no-speculation points, on the gate
    # server; the configs served with the draft are the draft's job's (issue 27, part 3).
    jobs = work / "jobs"
    for index, artifact in enumerate(GATED, start=1):
        ledger = Ledger(jobs / f"eval-{index}" / "model_cards" / "demo" / "results")
        assert {r.artifact_id for r in ledger.records(kind="gate")} == {artifact}
        speed = ledger.records(kind="speed")
        assert speed and {(r.artifact_id, r.draft_artifact_id) for r in speed} == {(artifact, None)}, artifact
    merged = Ledger(jobs / "merge" / "model_cards" / "demo" / "results")
    assert sorted((r.artifact_id, r.subject_id) for r in merged.records(kind="gate")) == sorted(
        (a, g) for a in GATED for g in GATES)
    # The draft's job measured it served with its target (speed records reach the merge job too), from the
    # snapshot of its vendor repo; the identity it recorded is the one the Hub states (LFS sha256), which the
    # merge job, which downloads nothing, found the records by.
    pins = read_pins(ROOT / "build" / "demo")
    drafted = [r for r in merged.records(kind="speed") if r.draft_artifact_id == "draft"]
    stated = hub_content_hash(DRAFT_REPO, pins[DRAFT_REPO])
    assert drafted and stated.bytes_read == 0 and {r.draft_hash for r in drafted} == {stated.sha256}
    for record in drafted:
        config = json.loads(record.serve.argv[record.serve.argv.index("--speculative-config") + 1])
        assert "models--hfrelease-demo--tiny-draft/snapshots/" + pins[DRAFT_REPO] in config["model"]
    # Nothing was written back into the repository: the jobs worked on their own copies.
    assert not list((repository / "model_cards" / "demo" / "results").iterdir())

    # Every file of every card the render job made -- hidden ones included -- is in the published repo.
    rendered = jobs / "render" / "model_cards" / "demo"
    with open_hub(LOCAL, family_root=repository, hub_root=work / "hub") as hub:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=hub.endpoint, token=hub.token.value if hub.token else None)
        for artifact, repo in REPOS.items():
            card_files = {p.relative_to(rendered / artifact).as_posix()
                          for p in (rendered / artifact).rglob("*") if p.is_file()}
            assert "README.md" in card_files
            if artifact == "w8a8-int8":  # a published quant: its gates' records, in nested folders
                assert any(f.startswith("every_eval_ever/data/mc/") for f in card_files), card_files
                assert not any(f.startswith(".eval_results/") for f in card_files)  # no registered benchmark
            published = set(api.list_repo_files(repo, revision="v0.1"))
            assert card_files <= published, (repo, card_files - published)
            if artifact in GATED:  # the tag push measured speed: the published cards have speed tables
                card = Path(api.hf_hub_download(repo, "README.md", revision="v0.1",
                                                local_dir=tmp_path / "published" / artifact)).read_text()
                speed = card.split("\n## Speed\n", 1)[1].split("\n## ", 1)[0]
                assert "| Config | Output tok/s |" in speed and "not measured" not in speed, (artifact, speed[:600])
        # The draft's repo ships its declared training provenance, speculators' per-epoch layout kept.
        published = set(api.list_repo_files(REPOS["draft"], revision="v0.1"))
        assert {"train_command.txt", "0/val_metrics.json", "3/val_metrics.json"} <= published, published
        # The vendor repos are published from themselves: each release commit sits on the pinned upload.
        for repo, revision in pins.items():
            assert revision in [c.commit_id for c in api.list_repo_commits(repo, revision="v0.1")][1:], repo

    text = summary.read_text()
    assert text.startswith("## Release demo v0.1: every job succeeded")
    assert "| eval w8a8-int8 | ✅ success |" in text
    assert "Gates after the merge" in text  # written by the merge job's own step
    assert "hfrelease-demo/tiny-W8A8-int8" in text  # written by the publish job's own step
