"""CI awareness without servers: folds, step summaries, job outputs, the tag check and the gate policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfrelease.ci import github as ci
from hfrelease.ci.rehearsal import rehearse, summary_markdown, write_release_workflow
from hfrelease.cli import main
from hfrelease.errors import ExitCode
from hfrelease.evaluation.judging import GateRow
from hfrelease.evaluation.runner import EvalReport
from hfrelease.manifest import load_manifest
from hfrelease.publish.decision import GateDecision, GateProblem, MatrixEntry, TagMismatchError, check_tag, eval_matrix


def _row(artifact: str, verdict: str, gate: str = "arith") -> GateRow:
    return GateRow(artifact_id=artifact, gate_id=gate, label=f"{gate} | exact", origin="measured", status="ok",
                   value=0.5, stderr=0.05, n=20, truncated=0, empty=0, mode="non-thinking",
                   verdict=verdict, reason="below the margin" if verdict == "fail" else "")  # type: ignore[arg-type]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_detect_reads_github_actions_variables(tmp_path: Path) -> None:
    """GITHUB_ACTIONS=true turns folds on; the summary and output files are taken from the environment."""
    found = ci.CiEnvironment.detect({"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")})
    assert found.github_actions and found.step_summary == tmp_path / "s.md" and found.output is None
    assert not ci.CiEnvironment.detect({}).github_actions


def test_group_lines_escape_what_would_end_the_command() -> None:
    """A fold's title keeps newlines and percent signs from ending or corrupting the workflow command."""
    assert ci.group_start("eval: a\nb 5%") == "::group::eval: a%0Ab 5%25"
    assert ci.group_end() == "::endgroup::"


def test_summary_tables_escape_cells_and_redact(tmp_path: Path) -> None:
    """Gate rows become a Markdown table; a '|' in a label stays in its cell; summaries append."""
    path = tmp_path / "summary.md"
    ci.append_summary(path, ci.gate_summary([_row("fp8", "fail"), _row("ref", "reference")]))
    ci.append_summary(path, "second")
    text = path.read_text()
    assert "| fp8 | arith \\| exact |" in text and "❌ fail: below the margin" in text
    assert text.endswith("second\n\n")


def test_set_output_uses_a_delimiter(tmp_path: Path) -> None:
    """Job outputs are written in the heredoc form, so a value with newlines cannot inject another output."""
    path = tmp_path / "out"
    ci.set_output(path, "matrix", '{"a": 1}\nx=y')
    name, value = path.read_text().split("\n", 1)
    delimiter = name.split("<<")[1]
    assert name.startswith("matrix<<ghadelimiter_") and value == f'{{"a": 1}}\nx=y\n{delimiter}\n'


def test_tag_must_be_the_manifests_release_tag(fixture_family: Path) -> None:
    """The manifest's own tag passes; any other tag is a config error (exit 3) naming both and what to do."""
    manifest = load_manifest(fixture_family)
    assert check_tag(manifest, "v1.0") == check_tag(manifest, None) == "v1.0"
    with pytest.raises(TagMismatchError) as error:
        check_tag(manifest, "v1.1")
    assert error.value.exit_code == ExitCode.CONFIG
    assert "'v1.1' does not match" in error.value.message and "'v1.0'" in error.value.message
    assert error.value.hint is not None and "family.version" in error.value.hint


def test_release_with_the_wrong_tag_stops_before_any_job(
    fixture_family: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """`hfrelease release --tag` with another version exits 3 in the check job; no eval job directory exists."""
    summary = tmp_path / "summary.md"
    work = tmp_path / "work"
    assert _run(["release", str(fixture_family), "--write-workflow", "--root", str(tmp_path)], capsys)[0] == 0
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GITHUB_STEP_SUMMARY", str(summary))
        code, out, err = _run(["release", str(fixture_family), "--tag", "v2.0", "--work", str(work)], capsys)
    assert code == ExitCode.CONFIG
    # The check job's own step said it, in the job's log.
    assert "the tag 'v2.0' does not match this manifest's release tag 'v1.0'" in err
    assert "failure" in out and "skipped" in out
    assert not list((work / "jobs").glob("eval*"))
    assert "stopped (exit 3)" in summary.read_text()


def test_only_check_writes_the_matrix_output(
    fixture_family: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`release --only check` lists the eval matrix (artifacts with gates, then drafts) for GITHUB_OUTPUT."""
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code, out, _ = _run(["release", str(fixture_family), "--tag", "v1.0", "--only", "check"], capsys)
    assert code == 0
    matrix = {"include": [{"artifact": "ref", "publish": False}, {"artifact": "fp8", "publish": True},
                          {"artifact": "draft", "publish": True}]}
    assert json.loads(out) == matrix
    lines = (tmp_path / "output").read_text().splitlines()
    assert json.loads(lines[1]) == matrix
    assert "| fp8 | True |" in (tmp_path / "summary.md").read_text()


def test_only_check_refuses_what_hfrelease_check_refuses(
    fixture_family: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check job runs exactly `hfrelease check`, preflight included: a quant whose checkpoint holds no
    weights (found by the preflight, not by the manifest's load) stops the release before any eval job."""
    (fixture_family / "checkpoints" / "fp8" / "model.safetensors").unlink()
    check_code, _, check_err = _run(["check", str(fixture_family), "--offline"], capsys)
    code, out, err = _run(["release", str(fixture_family), "--tag", "v1.0", "--only", "check"], capsys)
    assert check_code == code == ExitCode.CONFIG, (check_err, err)
    assert "(preflight)" in err and "artifact[1].source.path" in err and not out


def test_only_check_with_the_wrong_tag_exits_3(fixture_family: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The workflow's first job fails on a tag that is not the release's, with the message in the log."""
    code, _, err = _run(["release", str(fixture_family), "--tag", "v1.0.1", "--only", "check"], capsys)
    assert code == ExitCode.CONFIG and "does not match" in err


def test_matrix_has_a_job_per_draft_and_unknown_artifacts_are_named(fixture_family: Path) -> None:
    """A draft has its own job (its draft gates), except in a matrix cut to some quality gates; an unknown
    --artifact is a config error naming the known ones."""
    manifest = load_manifest(fixture_family)
    assert [e.artifact for e in eval_matrix(manifest)] == ["ref", "fp8", "draft"]
    assert [e.artifact for e in eval_matrix(manifest, gates=[manifest.gate[0].id])] == ["ref", "fp8"]
    assert eval_matrix(manifest, ["draft"]) == [MatrixEntry(artifact="draft", publish=True)]
    assert eval_matrix(manifest, ["fp8"]) == [MatrixEntry(artifact="fp8", publish=True)]
    with pytest.raises(Exception, match="no artifact 'nope'"):
        eval_matrix(manifest, ["nope"])


def test_gate_decision_exit_codes() -> None:
    """A failed gate of a published artifact is exit 4; a void or missing result is exit 6; allowed ones pass."""
    fail = GateProblem(artifact="fp8", gate="arith", kind="fail", text="fp8: arith: fail")
    missing = GateProblem(artifact="fp8", gate="mc", kind="missing", text="fp8: mc: no result")
    assert GateDecision(rows=(), blocking=(), allowed=(fail,)).error() is None
    error = GateDecision(rows=(), blocking=(fail,), allowed=()).error()
    assert error is not None and error.exit_code == ExitCode.GATE_FAILED and "before publishing" in error.message
    error = GateDecision(rows=(), blocking=(fail, missing), allowed=()).error()
    assert error is not None and error.exit_code == ExitCode.MEASUREMENT_FAILED


def test_rehearsal_summary_lists_jobs_and_gates(fixture_family: Path, tmp_path: Path) -> None:
    """The summary of a stopped rehearsal has the conclusion, the error, one row per job and the substitutions."""
    import os

    write_release_workflow(fixture_family, root=tmp_path)
    report = rehearse(fixture_family, work_dir=tmp_path / "work", tag="v0.9", env=dict(os.environ))
    assert report.exit_code == ExitCode.CONFIG
    assert [(j.id, j.status) for j in report.jobs] == [
        ("check", "failure"), ("eval", "skipped"), ("merge", "skipped"), ("render", "skipped"), ("bundle", "skipped"),
        ("publish", "skipped")]
    text = summary_markdown(report)
    assert text.startswith(f"## Release {report.family} v0.9: stopped (exit 3)")
    assert "| check the manifest and the tag | ❌ failure |" in text
    assert "Substituted steps:" in text and "actions/checkout" in text and "pip" not in text.split("Substituted")[0]


def test_eval_writes_its_gate_table_to_the_step_summary_on_github_actions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """`hfrelease eval`'s view folds on GitHub Actions and append the gate table; elsewhere they do nothing."""
    from hfrelease.stages.eval import ci_summary

    report = EvalReport(rows=(_row("fp8", "pass"),), servers_started=1, requests_sent=20, run_dir=tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    lines: list[str] = []
    with ci.folded("eval: fp8", lines.append):
        lines.append("inside")
    ci_summary(gates=report)
    assert not summary.exists() and lines == ["inside"]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    lines.clear()
    with pytest.raises(KeyboardInterrupt), ci.folded("eval: fp8\n::stop-commands::x", lines.append):
        lines.append("inside")
        raise KeyboardInterrupt  # the fold closes all the same
    ci_summary(gates=report)
    assert lines == ["::group::eval: fp8%0A::stop-commands::x", "inside", "::endgroup::"]
    assert "| fp8 | arith \\| exact |" in summary.read_text()


def test_rehearsal_refuses_a_workflow_of_another_manifest_or_none(fixture_family: Path, tmp_path: Path) -> None:
    """The rehearsal runs the workflow that releases this manifest: none found, or another MANIFEST, is exit 3."""
    from hfrelease.errors import ConfigError

    with pytest.raises(ConfigError, match=r"no \.github/workflows/release\.yml"):
        rehearse(fixture_family, work_dir=tmp_path / "work", env={})
    path = write_release_workflow(fixture_family, root=tmp_path)
    path.write_text(path.read_text().replace("MANIFEST: ", "MANIFEST: other/"))
    with pytest.raises(ConfigError, match="the workflow releases"):
        rehearse(fixture_family, work_dir=tmp_path / "work", env={})


def test_release_without_only_refuses_artifact_filters(
    fixture_family: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """--artifact/--gate cannot restrict a rehearsal: the workflow runs as written (usage error, exit 2)."""
    code, _, err = _run(["release", str(fixture_family), "--artifact", "fp8"], capsys)
    assert code == ExitCode.USAGE and "--only" in err


def test_the_release_workflow_goes_to_the_manifests_checkout_by_default(fixture_family: Path, tmp_path: Path) -> None:
    """Without a root, `release --write-workflow` writes under the git checkout holding the manifest."""
    (tmp_path / ".git").mkdir()
    assert write_release_workflow(fixture_family) == tmp_path.resolve() / ".github" / "workflows" / "release.yml"


def test_the_written_workflows_path_prints_as_written(fixture_family: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`release --write-workflow` names the file it wrote as it is spelled, brackets included (never as markup)."""
    import shutil

    root = tmp_path / "repo [main]"
    (root / ".git").mkdir(parents=True)
    family = shutil.copytree(fixture_family, root / "family")
    code, _, err = _run(["release", str(family), "--write-workflow"], capsys)
    assert code == 0
    assert f"wrote {root.resolve() / '.github' / 'workflows' / 'release.yml'}" in " ".join(err.split())
