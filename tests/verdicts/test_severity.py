"""One table of what a verdict implies (`hfrelease.verdicts.severity`): `eval` and `release --only gate` exit
alike on the same planted ledger, for every verdict, and every place that decides a verdict's consequence
reads the table (no vLLM: every result is planted, so `eval` starts no server)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from hfrelease.errors import ExitCode
from hfrelease.evaluation.judging import GateRow
from hfrelease.evaluation.plan import plan_eval
from hfrelease.evaluation.runner import EvalReport
from hfrelease.ledger.record import Sample
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest
from hfrelease.publish.decision import GateDecision, GateProblem
from hfrelease.verdicts import severity
from hfrelease.verdicts.verdict import Verdict
from tests.conftest import CliRun
from tests.verdicts.test_gate_verdict import GOOD, LOW, WORSE, _record

pytestmark = pytest.mark.unit

GATES = ["--gate", "arith", "--gate", "json"]  # the draft's gates are judged from speed records: not these


def _plant(family: Manifest, scores: dict[tuple[str, str], list[float]], *, disjoint: set[str] = frozenset()) -> None:
    """Record every gate of the fixture family; the reference's samples of the gates in `disjoint` share no
    item with the artifact's (their doc ids are shifted)."""
    ledger = Ledger(family.ledger_dir)
    for job in plan_eval(family, ledger=ledger, hash_cache=None, gates=["arith", "json"]).servers:
        assert job.content is not None
        for g in job.gates:
            record = _record(g.input_key, job.artifact.id, job.content.sha256, g.gate.id, g.gate.metric,
                             scores[(job.artifact.id, g.gate.id)])
            if job.artifact.id == "ref" and g.gate.id in disjoint:
                record = record.model_copy(update={"samples": tuple(
                    Sample(doc_id=f"other-{s.doc_id}", score=s.score, truncated=False, empty=False)
                    for s in record.samples)})
            ledger.write(record)


ALL_GOOD = {(a, g): GOOD for a in ("ref", "fp8") for g in ("arith", "json")}

# Each verdict a planted ledger can give (a void result is never offered by the ledger: it is re-measured,
# so "void" and "missing" are swept on the reports below), and the one exit code both commands give.
LEDGERS = {
    "pass": (ALL_GOOD, set(), ExitCode.OK),
    "fail": (ALL_GOOD | {("fp8", "arith"): WORSE}, set(), ExitCode.GATE_FAILED),
    "reference below its floor": (ALL_GOOD | {("ref", "json"): LOW, ("fp8", "json"): LOW}, set(),
                                  ExitCode.GATE_FAILED),
    # The reference's result is recorded but shares no item with the artifact's: nothing can be compared.
    # `eval` exited 0 here and the release decision 6.
    "no-reference": (ALL_GOOD, {"arith"}, ExitCode.MEASUREMENT_FAILED),
    "no-reference beside a failure": (ALL_GOOD | {("fp8", "json"): WORSE}, {"arith"}, ExitCode.MEASUREMENT_FAILED),
}


@pytest.mark.parametrize("case", list(LEDGERS))
def test_eval_and_the_release_gate_exit_alike(case: str, family: Manifest, cli: CliRun) -> None:
    """`hfrelease eval` (nothing left to measure) and `hfrelease release --only gate` on the same ledger."""
    scores, disjoint, expected = LEDGERS[case]
    _plant(family, scores, disjoint=disjoint)
    root = str(family.root)

    eval_code, eval_out, eval_err = cli(["eval", root, *GATES, "--json"])
    gate_code, _, gate_err = cli(["release", root, "--only", "gate", *GATES])

    assert '"servers_started": 0' in eval_out, eval_err
    assert (eval_code, gate_code) == (expected, expected), (eval_err, gate_err)


def _row(artifact: str, gate: str, verdict: str) -> GateRow:
    return GateRow(artifact_id=artifact, gate_id=gate, label=gate, origin="recorded", status="ok", value=0.5,
                   stderr=None, n=10, truncated=0, empty=0, mode="non-thinking", verdict=verdict,  # type: ignore[arg-type]
                   reason=f"why {verdict}")


@pytest.mark.parametrize("verdict", [*get_args(Verdict), "missing"])
def test_every_verdict_gives_one_exit_code(verdict: str, tmp_path: Path) -> None:
    """For each verdict the table knows: `eval`'s report (beside the reference's own row) and the release
    decision stop, or not, with the table's code; the release stops exactly on what the table blocks."""
    expected = severity.consequence(verdict)
    problem = GateProblem(artifact="fp8", gate="arith", kind=verdict, text=f"fp8: arith: {verdict}")
    blocking = (problem,) if expected.blocks_publish else ()
    decision = GateDecision(rows=(), blocking=blocking, allowed=())
    error = decision.error()
    assert (error.exit_code if error is not None else ExitCode.OK) == expected.exit_code
    if verdict != "missing":  # not a row of eval's table: the release decision's own, for an unrecorded gate
        report = EvalReport(rows=(_row("ref", "arith", "reference"), _row("fp8", "arith", verdict)),
                            servers_started=0, requests_sent=0, run_dir=tmp_path, reference_id="ref")
        assert report.exit_code == expected.exit_code


def test_an_eval_job_of_one_artifact_waits_for_the_reference(tmp_path: Path) -> None:
    """A release's eval job of one artifact has no reference result (the reference's own job measures it): its
    no-reference rows do not fail the job; with the reference's row beside them they do."""
    alone = EvalReport(rows=(_row("fp8", "arith", "no-reference"),), servers_started=1, requests_sent=10,
                       run_dir=tmp_path, reference_id="ref")
    beside = EvalReport(rows=(_row("ref", "arith", "void"), _row("fp8", "arith", "no-reference")),
                        servers_started=1, requests_sent=10, run_dir=tmp_path, reference_id="ref")
    assert (alone.exit_code, beside.exit_code) == (ExitCode.OK, ExitCode.MEASUREMENT_FAILED)


def test_the_order_is_server_void_fail_ok() -> None:
    """The most serious outcome decides, whatever the order they come in."""
    assert severity.exit_code(["pass", "fail", "void", "server"]) == ExitCode.SERVER_FAILED
    assert severity.exit_code(["fail", "no-reference", "pass"]) == ExitCode.MEASUREMENT_FAILED
    assert severity.exit_code(["reference", "fail"]) == ExitCode.GATE_FAILED
    assert severity.exit_code([]) == ExitCode.OK
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        severity.exit_code(["maybe"])
