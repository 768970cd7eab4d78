"""Drafts in the release graph: their matrix jobs, their draft gates in the release decision, their cards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import ExitCode
from hfrelease.ledger.record import LedgerRecord, Metric, ServeRecord
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.publish.decision import MatrixEntry, decide_gates, eval_matrix
from hfrelease.speed.drafts import draft_manifest, plan_drafts
from hfrelease.speed.plan import point_input_key

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# Records made on an eval runner name its vLLM; the merge job may have another one (or none) installed.
RUNNER_VLLM = "0.0.0-eval-runner"


def test_flagship_matrix_includes_the_eagle3_draft() -> None:
    """The flagship's check job lists a published job for its EAGLE-3 draft, after the gated artifacts."""
    manifest = load_manifest(ROOT / "model_cards" / "nanbeige4.2-3b", check_files=False)
    matrix = eval_matrix(manifest)
    assert [e.artifact for e in matrix] == ["bf16", "fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16", "eagle3"]
    assert matrix[-1] == MatrixEntry(artifact="eagle3", publish=True)


def test_flagship_draft_job_serves_it_with_its_target_only() -> None:
    """The EAGLE-3 job measures the workloads naming it on fp8-dynamic (its target), none beside eagle3."""
    manifest = load_manifest(ROOT / "model_cards" / "nanbeige4.2-3b", check_files=False)
    cut = draft_manifest(manifest, "eagle3")
    assert [(w.id, w.artifacts, w.speculative) for w in cut.workload] == [
        ("reasoning", ["fp8-dynamic"], ["none", "eagle3"]),
        ("longdoc-summarization", ["fp8-dynamic"], ["none", "eagle3"]),  # ngram is not this job's
        ("articles-load", ["fp8-dynamic"], ["eagle3"]),
    ]


def test_demo_matrix_includes_both_drafts() -> None:
    """The demo's matrix has the published drafts and the unpublished EAGLE-3 fixture."""
    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    drafts = [e for e in eval_matrix(manifest) if manifest.artifact_by_id(e.artifact).kind == "draft"]
    assert drafts == [MatrixEntry(artifact="draft", publish=True), MatrixEntry(artifact="eagle3", publish=True),
                      MatrixEntry(artifact="eagle3-untrained", publish=False)]


def _family(root: Path, *, publish: bool = True, **thresholds: float) -> Manifest:
    """The fixture family (draft of fp8 on the chat workload) with draft gates and `publish` set."""
    for name in ("ref", "fp8", "draft"):  # weights to hash: an artifact's identity covers its weight files
        (root / "checkpoints" / name / "model.safetensors").write_bytes(f"weights of {name}".encode())
    manifest = load_manifest(root)
    draft = manifest.artifact_by_id("draft")
    assert draft.draft is not None
    changed = draft.model_copy(update={"publish": publish, "draft": draft.draft.model_copy(update=thresholds)})
    artifacts = [changed if a.id == "draft" else a for a in manifest.artifact]
    return manifest.model_copy(update={"artifact": artifacts})


def _record(job: Any, point: Any, metrics: dict[str, float], *, status: str = "ok") -> LedgerRecord:
    """A speed record of `point` as an eval runner with RUNNER_VLLM would have written it."""
    key = point_input_key(point.workload, concurrency=point.concurrency, prompts_sha256=point.prompts_sha256,
                          content_sha256=job.content.sha256,
                          draft_sha256=job.draft_content.sha256 if job.draft_content else None,
                          speculative=job.speculative, public=job.public, vllm_version=RUNNER_VLLM)
    return LedgerRecord(
        kind="speed", family="fixture", artifact_id=job.artifact.id, artifact_hash=job.content.sha256,
        artifact_files=job.content.files, draft_artifact_id=job.draft.id if job.draft else None,
        draft_hash=job.draft_content.sha256 if job.draft_content else None, subject_id=point.workload.id,
        harness="vllm-bench", task=point.workload.prompts, task_hash=point.prompts_sha256, mode="non-thinking",
        n=point.num_prompts, seed=0, generation={"output_len": point.workload.output_len},
        metrics={k: Metric(value=v) for k, v in metrics.items()} if status == "ok" else {}, truncated=0, empty=0,
        serve=ServeRecord(argv=tuple(job.public.argv), env={}, display=job.public.display()),
        versions={"vllm": RUNNER_VLLM}, hardware={"cpu": "test"}, started_at="2026-11-30T09:00:00Z",
        duration_s=10.0, input_key=key,
        extra={"speculative": job.spec_id, "concurrency": point.concurrency, "repeats": 3, "failed": 0},
        status=status, void_reason="server died" if status == "void" else None,  # type: ignore[arg-type]
    )


def _measure(manifest: Manifest, ledger: Ledger, *, acceptance: float | None, none_tps: float = 50.0,
             draft_tps: float = 80.0, void: bool = False) -> None:
    """Write the draft job's records: every point of its plan, with these numbers."""
    plan = plan_drafts(manifest, ["draft"], ledger=ledger, hash_cache=None)
    for job in plan.servers:
        for point in job.points:
            metrics = {"output_throughput": none_tps if job.draft is None else draft_tps}
            if job.draft is not None and acceptance is not None:
                metrics |= {"spec_acceptance_rate": acceptance, "spec_mean_acceptance_length": 1 + 3 * acceptance}
            ledger.write(_record(job, point, metrics, status="void" if void and job.draft else "ok"))


def _decide(manifest: Manifest, ledger: Ledger) -> Any:
    return decide_gates(manifest, ledger=ledger, hash_cache=None, artifacts=["draft"])


def test_draft_gates_pass_with_records_of_another_vllm(fixture_family: Path) -> None:
    """Acceptance and speedup above their floors on the target: the release goes on, every check judged."""
    manifest = _family(fixture_family, min_acceptance_rate=0.5, min_acceptance_length=2.0, min_speedup=1.2)
    ledger = Ledger(fixture_family / "results")
    _measure(manifest, ledger, acceptance=0.8)
    decision = _decide(manifest, ledger)
    assert decision.blocking == () and decision.allowed == () and decision.error() is None
    checks = {(c.workload_id, c.check): c for c in decision.draft_checks}
    assert set(checks) == {("chat", c) for c in ("target", "acceptance", "acceptance-length", "speedup")}
    assert all(c.verdict == "pass" and c.artifact_id == "fp8" for c in checks.values())
    assert checks[("chat", "speedup")].value == 1.6


def test_the_merged_speedup_gate_is_judged_at_every_concurrency_of_the_workload(fixture_family: Path) -> None:
    """Issue 24: chat measured at concurrency 1 and 4; the draft is 1.6x at batch 1 but 0.8x at concurrency 4
    (planted). The merge job's speedup gate reads both points and fails, naming the losing one (exit 4)."""
    manifest = _family(fixture_family, min_acceptance_rate=0.5, min_speedup=1.2)
    workloads = [w.model_copy(update={"concurrency": [1, 4]}) for w in manifest.workload]
    manifest = manifest.model_copy(update={"workload": workloads})
    ledger = Ledger(fixture_family / "results")
    plan = plan_drafts(manifest, ["draft"], ledger=ledger, hash_cache=None)
    tps = {(False, 1): 50.0, (True, 1): 80.0, (False, 4): 100.0, (True, 4): 80.0}
    for job in plan.servers:
        for point in job.points:
            metrics = {"output_throughput": tps[(job.draft is not None, point.concurrency)]}
            if job.draft is not None:
                metrics |= {"spec_acceptance_rate": 0.8, "spec_mean_acceptance_length": 3.4}
            ledger.write(_record(job, point, metrics))
    decision = _decide(manifest, ledger)
    assert [(p.gate, p.kind) for p in decision.blocking] == [("draft:speedup", "fail")]
    assert "concurrency 4 0.80x < 1.2x" in decision.blocking[0].text
    assert "batch-1 speedup" not in decision.blocking[0].text  # 1.6x passes; the losing point is what is named
    (speedup,) = [c for c in decision.draft_checks if c.check == "speedup"]
    assert speedup.value == 0.8
    error = decision.error()
    assert error is not None and error.exit_code == ExitCode.GATE_FAILED


def test_a_failed_draft_gate_stops_the_release_with_exit_4(fixture_family: Path) -> None:
    """A published draft under its acceptance floor blocks the release (gate failure, exit 4)."""
    manifest = _family(fixture_family, min_acceptance_rate=0.5)
    ledger = Ledger(fixture_family / "results")
    _measure(manifest, ledger, acceptance=0.3)
    decision = _decide(manifest, ledger)
    assert [(p.artifact, p.gate, p.kind) for p in decision.blocking] == [("draft", "draft:acceptance", "fail")]
    assert "0.300 < 0.5" in decision.blocking[0].text
    error = decision.error()
    assert error is not None and error.exit_code == ExitCode.GATE_FAILED


def test_an_unpublished_draft_may_fail(fixture_family: Path) -> None:
    """publish = false: the same failure is reported as allowed and the release goes on."""
    manifest = _family(fixture_family, publish=False, min_acceptance_rate=0.5, min_speedup=2.0)
    ledger = Ledger(fixture_family / "results")
    _measure(manifest, ledger, acceptance=0.3)
    decision = _decide(manifest, ledger)
    assert decision.blocking == () and decision.error() is None
    assert {p.gate for p in decision.allowed} == {"draft:acceptance", "draft:speedup"}


def test_a_draft_never_measured_stops_the_release_with_exit_6(fixture_family: Path) -> None:
    """No speed record for the draft's job: every point is missing, a measurement problem (exit 6)."""
    manifest = _family(fixture_family)
    decision = _decide(manifest, Ledger(fixture_family / "results"))
    assert decision.blocking and all(p.kind == "missing" for p in decision.blocking)
    assert "its eval job failed or did not run" in decision.blocking[0].text
    error = decision.error()
    assert error is not None and error.exit_code == ExitCode.MEASUREMENT_FAILED


def test_acceptance_must_be_measured_even_without_a_floor(fixture_family: Path) -> None:
    """A draft with no thresholds whose records carry no acceptance counters fails its acceptance check."""
    manifest = _family(fixture_family)
    ledger = Ledger(fixture_family / "results")
    _measure(manifest, ledger, acceptance=None)
    decision = _decide(manifest, ledger)
    assert [(p.gate, p.kind) for p in decision.blocking] == [("draft:acceptance", "fail")]
    assert "no acceptance counters" in decision.blocking[0].text


def test_a_void_draft_point_is_a_measurement_problem(fixture_family: Path) -> None:
    """A void record of the draft's point: exit 6, not a pass."""
    manifest = _family(fixture_family)
    ledger = Ledger(fixture_family / "results")
    _measure(manifest, ledger, acceptance=0.8, void=True)
    decision = _decide(manifest, ledger)
    assert decision.blocking and {p.kind for p in decision.blocking} == {"void"}
    error = decision.error()
    assert error is not None and error.exit_code == ExitCode.MEASUREMENT_FAILED


def test_a_draft_no_workload_serves_with_its_target_is_missing(fixture_family: Path) -> None:
    """Workloads serving the draft only with another artifact never measure it: a blocking problem."""
    manifest = _family(fixture_family)
    workloads = [w.model_copy(update={"artifacts": ["ref"]}) for w in manifest.workload]
    manifest = manifest.model_copy(update={"workload": workloads})
    decision = _decide(manifest, Ledger(fixture_family / "results"))
    assert [(p.gate, p.kind) for p in decision.blocking] == [("draft:target", "missing")]
    assert "no workload serves the draft 'draft' with its target 'fp8'" in decision.blocking[0].text
    with pytest.raises(Exception, match="no workload serves the draft"):
        plan_drafts(manifest, ["draft"], ledger=Ledger(fixture_family / "results"), hash_cache=None)


def _dry_run(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    import json

    from hfrelease.cli import main

    try:
        main(["eval", *args, "--dry-run", "--json"])
    except SystemExit as exit_:
        assert exit_.code in (0, None), capsys.readouterr().err
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_eval_artifact_draft_is_its_release_job(fixture_family: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`eval --artifact draft`, the matrix's command without --speed, plans the draft's job: its target with
    and without the draft on the workload naming it, no ngram, no gate; named beside it, ref runs its gates."""
    _family(fixture_family)
    plan = _dry_run([str(fixture_family), "--artifact", "draft"], capsys)
    servers = [(s["artifact"], s["speculative"], [p["concurrency"] for p in s["points"]])
               for s in plan["speed"]["servers"]]
    assert servers == [("fp8", "none", [1, 2]), ("fp8", "draft", [1, 2])]
    assert "servers" not in plan  # no gate plan: a draft has no quality gate
    both = _dry_run([str(fixture_family), "--artifact", "ref", "--artifact", "draft"], capsys)
    assert [s["artifact"] for s in both["servers"]] == ["ref"]
    assert [(s["artifact"], s["speculative"]) for s in both["speed"]["servers"]] == [("fp8", "none"), ("fp8", "draft")]


def test_check_job_refuses_a_draft_no_workload_measures(
    fixture_family: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """`release --only check` exits 3 before any GPU time when a draft's job would have nothing to measure."""
    import tomllib

    import tomli_w

    from hfrelease.cli import main

    path = fixture_family / "release.toml"
    data = tomllib.loads(path.read_text())
    data["workload"] = [{**w, "artifacts": ["ref"]} for w in data["workload"]]
    path.write_text(tomli_w.dumps(data))
    with pytest.raises(SystemExit) as raised:
        main(["release", str(fixture_family), "--tag", "v1.0", "--only", "check"])
    assert raised.value.code == ExitCode.CONFIG
    assert "no workload serves the draft 'draft' with its target 'fp8'" in capsys.readouterr().err
