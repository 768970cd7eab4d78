"""The workflow runner on small synthetic workflows (cheap `run:` steps): it fails where GitHub would fail."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hfrelease.ci.actions.run import JobResult, RunResult, RunSettings
from hfrelease.ci.actions.runner import run_workflow
from hfrelease.ci.actions.workflow import load_workflow
from hfrelease.errors import ConfigError

CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"
DOWNLOAD = "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093"


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def job_started(self, name: str) -> None:
        pass

    def step_finished(self, job: str, step: object) -> None:
        pass

    def log(self, job: str, line: str) -> None:
        self.lines.append(f"{job}: {line}")

    def job_finished(self, job: JobResult) -> None:
        pass


def _run(tmp_path: Path, workflow: str, *, secrets: dict[str, str] | None = None,
         log: _Log | None = None) -> RunResult:
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
    (repo / "fam" / "a" / ".eval_results").mkdir(parents=True, exist_ok=True)
    (repo / "fam" / "a" / "README.md").write_text("card\n")
    path = repo / ".github" / "workflows" / "release.yml"
    path.write_text(textwrap.dedent(workflow).replace("CHECKOUT", CHECKOUT).replace("UPLOAD", UPLOAD)
                    .replace("DOWNLOAD", DOWNLOAD))
    settings = RunSettings(workflow=load_workflow(path), source=repo, work_dir=tmp_path / "work", ref_name="v1.0",
                           secrets=secrets or {})
    return run_workflow(settings, log)


def _statuses(run: RunResult) -> list[tuple[str, str]]:
    return [(j.name, j.status) for j in run.jobs]


# A release in miniature: check lists a matrix, eval jobs write cards with a hidden file, render gathers
# them into one family artifact, publish checks every card file arrived.
RELEASE = """
    name: release
    on: {push: {tags: ["v*"]}}
    env:
      FAMILY: fam
    jobs:
      check:
        runs-on: ubuntu-latest
        outputs:
          matrix: ${{ steps.list.outputs.matrix }}
        steps:
          - uses: CHECKOUT
            with: {persist-credentials: false}
          - id: list
            env:
              TAG: ${{ github.ref_name }}
            run: |
              test "$TAG" = v1.0
              echo 'matrix={"include":[{"artifact":"a"},{"artifact":"b"}]}' >> "$GITHUB_OUTPUT"
      eval:
        name: eval ${{ matrix.artifact }}
        needs: check
        runs-on: ubuntu-latest
        strategy:
          fail-fast: false
          matrix: ${{ fromJSON(needs.check.outputs.matrix) }}
        steps:
          - uses: CHECKOUT
          - name: install
            run: python -m pip install "hfrelease @ git+https://github.com/acme/hfrelease@0123456789abcdef0123456789abcdef01234567"
          - env:
              ARTIFACT: ${{ matrix.artifact }}
            run: |
              mkdir -p "$FAMILY/$ARTIFACT/.eval_results"
              echo "score: 1" > "$FAMILY/$ARTIFACT/.eval_results/gate.yaml"
              echo "STAMP=$ARTIFACT-stamp" >> "$GITHUB_ENV"
          - run: test "$STAMP" = "${ARTIFACT:-$(ls $FAMILY | tail -1)}-stamp" || test -n "$STAMP"
          - uses: UPLOAD
            with:
              name: results-${{ matrix.artifact }}
              path: fam/
              include-hidden-files: true
      render:
        needs: eval
        runs-on: ubuntu-latest
        steps:
          - uses: CHECKOUT
          - uses: DOWNLOAD
            with:
              pattern: results-*
              path: fam
              merge-multiple: true
          - uses: UPLOAD
            with:
              name: release-family
              path: fam/
              include-hidden-files: true
              if-no-files-found: error
      publish:
        needs: render
        runs-on: ubuntu-latest
        environment:
          name: release
        steps:
          - uses: DOWNLOAD
            with:
              name: release-family
              path: fam
          - env:
              HF_TOKEN: ${{ secrets.HF_TOKEN }}
            run: |
              test -f fam/a/.eval_results/gate.yaml
              test -f fam/b/.eval_results/gate.yaml
              test -f fam/a/README.md
              echo "token is $HF_TOKEN"
"""


def test_a_release_shaped_workflow_runs_end_to_end(tmp_path: Path) -> None:
    """Matrix from a job output, GITHUB_ENV, artifacts with hidden files, needs; substitutions named; secret masked."""
    log = _Log()
    run = _run(tmp_path, RELEASE, secrets={"HF_TOKEN": "hf_secret_value"}, log=log)
    assert run.ok, [(j.name, j.status, j.detail) for j in run.jobs]
    assert _statuses(run) == [("check", "success"), ("eval a", "success"), ("eval b", "success"),
                              ("render", "success"), ("publish", "success")]
    eval_a = run.jobs[1]
    assert [s.substituted is not None for s in eval_a.steps] == [True, True, False, False, False]
    assert "copy of the work tree" in (eval_a.steps[0].substituted or "")
    assert "not run" in (eval_a.steps[1].substituted or "")
    assert run.jobs[0].outputs["matrix"].startswith('{"include"')
    assert run.jobs[-1].steps[0].label == "environment release"  # no reviewers to ask: named, not hidden
    assert "required reviewers" in (run.jobs[-1].steps[0].substituted or "")
    assert any("token is ***" in line for line in log.lines)
    assert not any("hf_secret_value" in line for line in log.lines)
    # Each job ran in its own fresh workspace.
    assert (tmp_path / "work" / "jobs" / "eval-1" / "fam" / "a" / ".eval_results" / "gate.yaml").is_file()
    assert not (tmp_path / "work" / "jobs" / "eval-1" / "fam" / "b").exists()


def test_a_hidden_file_dropped_without_include_hidden_files_fails_the_publish_job(tmp_path: Path) -> None:
    """The family artifact without include-hidden-files loses `.eval_results/`: the job that needs it fails."""
    broken = RELEASE.replace("""              name: release-family
              path: fam/
              include-hidden-files: true""", """              name: release-family
              path: fam/""")
    run = _run(tmp_path, broken)
    assert not run.ok
    assert _statuses(run)[-1] == ("publish", "failure")
    step = run.jobs[-1].failed_step()
    assert step is not None and step.exit_code == 1
    render = next(j for j in run.jobs if j.name == "render")
    assert render.status == "success"  # the upload itself succeeds, as on GitHub


def test_a_wrong_artifact_name_fails_the_download_and_skips_what_follows(tmp_path: Path) -> None:
    """download-artifact of a name no job uploaded fails its step; the jobs that need it are skipped."""
    broken = RELEASE.replace("""              pattern: results-*
              path: fam
              merge-multiple: true""", """              name: results-all
              path: fam""")
    run = _run(tmp_path, broken)
    assert _statuses(run)[-2:] == [("render", "failure"), ("publish", "skipped")]
    step = run.jobs[-2].failed_step()
    assert step is not None and "Artifact 'results-all' not found" in step.detail


def test_a_missing_needs_is_a_race_the_rehearsal_loses(tmp_path: Path) -> None:
    """A publish job that does not need render starts with the run on GitHub: render's artifact is not there."""
    broken = RELEASE.replace("""      publish:
        needs: render
""", """      publish:
""")
    assert broken != RELEASE
    run = _run(tmp_path, broken)
    publish = next(j for j in run.jobs if j.name == "publish")
    assert publish.status == "failure"
    step = publish.failed_step()
    assert step is not None and "Artifact 'release-family' not found" in step.detail


def test_fail_fast_cancels_the_rest_of_the_matrix_and_not_cancelled_steps_still_run(tmp_path: Path) -> None:
    """With fail-fast (the default) one failed combination cancels the others; `!cancelled()` steps run on failure."""
    workflow = """
        on: push
        jobs:
          build:
            runs-on: ubuntu-latest
            strategy:
              matrix:
                n: [1, 2, 3]
            steps:
              - run: mkdir out && echo ${{ matrix.n }} > out/n.txt && test ${{ matrix.n }} != 1
              - if: ${{ !cancelled() }}
                uses: UPLOAD
                with:
                  name: out-${{ matrix.n }}
                  path: out/
              - run: echo never
          after:
            needs: build
            if: always()
            runs-on: ubuntu-latest
            steps:
              - run: echo "${{ needs.build.result }}" | grep -x failure
    """
    run = _run(tmp_path, workflow)
    assert _statuses(run) == [("build (1)", "failure"), ("build (2)", "cancelled"), ("build (3)", "cancelled"),
                              ("after", "success")]
    assert [s.status for s in run.jobs[0].steps] == ["failure", "success", "skipped"]


def test_unknown_needs_and_cycles_are_refused_before_anything_runs(tmp_path: Path) -> None:
    """A `needs` naming no job (or a cycle) is a workflow GitHub would not start."""
    with pytest.raises(ConfigError, match="unknown job 'rendr'"):
        _run(tmp_path, "on: push\njobs:\n  a:\n    needs: rendr\n    steps:\n      - run: true\n")
    with pytest.raises(ConfigError, match="cycle"):
        _run(tmp_path, "on: push\njobs:\n  a:\n    needs: b\n    steps: [{run: 'true'}]\n"
                       "  b:\n    needs: a\n    steps: [{run: 'true'}]\n")


def test_an_action_it_cannot_run_fails_the_step(tmp_path: Path) -> None:
    """Any action besides checkout, setup-python and the artifact actions fails loudly instead of being skipped."""
    run = _run(tmp_path, "on: push\njobs:\n  a:\n    steps:\n      - uses: actions/cache@v4\n")
    step = run.jobs[0].failed_step()
    assert step is not None and "cannot run the action" in step.detail
