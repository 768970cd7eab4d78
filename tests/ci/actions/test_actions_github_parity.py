"""The runner fails where GitHub Actions fails (issue 28, part 2), each on a small planted workflow: the
committed tree at checkout, setup-python's known versions, the lock files an install reads, job- and
step-level `continue-on-error` with `outcome`/`conclusion`, and `hashFiles`."""

from __future__ import annotations

import hashlib
import subprocess
import textwrap
from pathlib import Path

from hfrelease.ci.actions.run import RunResult, RunSettings
from hfrelease.ci.actions.runner import run_workflow
from hfrelease.ci.actions.substitute import head_commit, uncommitted
from hfrelease.ci.actions.workflow import load_workflow

CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
SETUP_PYTHON = "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97"
POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 13\n"


def _repo(tmp_path: Path, workflow: str) -> Path:
    repo = tmp_path / "repo"
    path = repo / ".github" / "workflows" / "release.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(workflow).replace("CHECKOUT", CHECKOUT).replace("SETUP_PYTHON", SETUP_PYTHON))
    return repo


def _run(repo: Path, tmp_path: Path, *, commit: str | None = None) -> RunResult:
    settings = RunSettings(workflow=load_workflow(repo / ".github" / "workflows" / "release.yml"), source=repo,
                           commit=commit, work_dir=tmp_path / "work", ref_name="v1.0")
    return run_workflow(settings)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


def _one_job(steps: str) -> str:
    return "name: w\non: push\njobs:\n  one:\n    runs-on: ubuntu-latest\n    steps:\n" + textwrap.indent(
        textwrap.dedent(steps), " " * 6)


def test_checkout_gives_the_committed_tree_with_lfs_pointers_not_the_work_tree(tmp_path: Path) -> None:
    """Jobs see HEAD's tree: an uncommitted edit and an untracked file are absent, an LFS file is its pointer
    (checkout's `lfs: false`), an executable stays executable. Before, the work tree on disk was copied."""
    repo = _repo(tmp_path, _one_job("""\
        - uses: CHECKOUT
        - run: |
            test "$(cat card.md)" = committed
            test ! -e untracked.txt
            head -1 weights.bin | grep -q '^version https://git-lfs.github.com/spec/v1$'
            test -x run.sh && ./run.sh
            test "$GITHUB_SHA" = "$EXPECTED"
          env:
            EXPECTED: ${{ github.sha }}
        """))
    _git(repo, "init", "-q")
    # Git LFS as a clean filter stores a pointer for the file on disk; the rehearsal must not smudge it back.
    (repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    pointer = tmp_path / "pointer"
    pointer.write_text(POINTER)
    _git(repo, "config", "filter.lfs.clean", f"sh -c 'cat >/dev/null; cat {pointer}'")
    _git(repo, "config", "filter.lfs.smudge", "cat")
    (repo / "weights.bin").write_bytes(b"real weights\n")
    (repo / "card.md").write_text("committed")
    (repo / "run.sh").write_text("#!/bin/sh\ntrue\n")
    (repo / "run.sh").chmod(0o755)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "card.md").write_text("edited, not committed")
    (repo / "untracked.txt").write_text("never committed")

    commit = head_commit(repo)
    assert commit is not None and len(commit) == 40
    assert uncommitted(repo) == ["card.md", "untracked.txt"]
    run = _run(repo, tmp_path, commit=commit)
    assert [(j.status, j.detail) for j in run.jobs] == [("success", "")]
    assert f"commit {commit[:12]}" in (run.jobs[0].steps[0].substituted or "")


def test_setup_python_fails_on_a_version_it_cannot_install(tmp_path: Path) -> None:
    """`python-version: "3.99"` fails the job as setup-python does; "3.12" and "3.x" stand in. Before, any
    version passed."""
    repo = _repo(tmp_path, _one_job("""\
        - uses: SETUP_PYTHON
          with: {python-version: "3.99"}
        - run: echo never
        """))
    run = _run(repo, tmp_path)
    assert run.jobs[0].status == "failure"
    assert "The version '3.99' with architecture 'x64' was not found" in run.jobs[0].detail
    assert [s.status for s in run.jobs[0].steps] == ["failure", "skipped"]
    for version in ("3.12", "3.x", "3.11.9"):
        repo = _repo(tmp_path, _one_job(f"""\
            - uses: SETUP_PYTHON
              with: {{python-version: "{version}"}}
            """))
        assert _run(repo, tmp_path).ok, version


def _install_job(variable: str, value: str, install: str) -> str:
    """A one-job workflow whose second step is the release workflow's install step: a job venv, then
    `pip install <install>`, with `variable` set to `value` in the workflow's env."""
    return f"""\
        name: w
        on: push
        env:
          {variable}: "{value}"
        jobs:
          one:
            runs-on: ubuntu-latest
            steps:
              - uses: CHECKOUT
              - run: |
                  python -m venv "$RUNNER_TEMP/venv"
                  "$RUNNER_TEMP/venv/bin/python" -m pip install {install}
        """


def test_an_install_step_fails_when_its_lock_file_is_not_in_the_tree(tmp_path: Path) -> None:
    """A pip install's `-r "$LOCK"` (expanded as the shell would) must be in the checked-out tree: pip fails
    on a missing requirements file. Before, every pip-only step passed unread."""
    workflow = _install_job("LOCK", "locks/release-cpu.txt", '--require-hashes --no-deps -r "$LOCK"')
    repo = _repo(tmp_path, workflow)
    run = _run(repo, tmp_path)
    assert run.jobs[0].status == "failure"
    assert "Could not open requirements file: locks/release-cpu.txt" in run.jobs[0].detail
    (repo / "locks").mkdir()
    (repo / "locks" / "release-cpu.txt").write_text("")
    assert _run(repo, tmp_path).ok


def test_an_install_step_fails_when_hfrelease_cannot_resolve_from_the_checkout(tmp_path: Path) -> None:
    """The hfrelease an install step names (`$HFRELEASE`) must resolve as pip would on the runner: a path not in
    the committed tree, or PyPI's (hfrelease is not published there), fails the step; a path that is in it,
    or an absolute path holding hfrelease on this machine (the rehearsal's own workflow), passes. Before, only
    the `-r` files were looked for (issue 28, part 2: "`--install` resolves")."""
    def job(spec: str) -> str:
        return _install_job("HFRELEASE", spec, '--no-deps "$HFRELEASE"')

    for spec, why in (("vendor/hfrelease", "does not exist in the repository"),
                      ("hfrelease==1.0", "asks PyPI for hfrelease"),
                      (str(tmp_path / "elsewhere"), "does not hold hfrelease on this machine")):
        repo = _repo(tmp_path, job(spec))
        run = _run(repo, tmp_path)
        assert run.jobs[0].status == "failure", spec
        assert "hfrelease cannot be installed" in run.jobs[0].detail and why in run.jobs[0].detail, run.jobs[0].detail
    repo = _repo(tmp_path, job("vendor/hfrelease"))
    (repo / "vendor" / "hfrelease").mkdir(parents=True)
    (repo / "vendor" / "hfrelease" / "pyproject.toml").write_text('[project]\nname = "hfrelease"\n')
    assert _run(repo, tmp_path).ok
    local = Path(__file__).resolve().parents[3]  # this checkout, as `rehearsal_install` names it
    assert _run(_repo(tmp_path, job(str(local))), tmp_path).ok


def test_job_continue_on_error_lets_the_run_pass_and_needs_see_success(tmp_path: Path) -> None:
    """A job with `continue-on-error: true` that fails: shown as failed, but `needs.<id>.result` is success,
    its dependants run and the run passes (actions/runner#1161); its matrix siblings are not cancelled.
    Before, the dependant was skipped and the run failed."""
    repo = _repo(tmp_path, """\
        name: w
        on: push
        jobs:
          flaky:
            runs-on: ubuntu-latest
            continue-on-error: ${{ matrix.n == 1 }}
            strategy: {matrix: {n: [1, 2]}}
            steps:
              - run: test ${{ matrix.n }} = 2
          after:
            needs: flaky
            runs-on: ubuntu-latest
            steps:
              - run: test "${{ needs.flaky.result }}" = success
        """)
    run = _run(repo, tmp_path)
    assert [(j.name, j.status) for j in run.jobs] == [("flaky (1)", "failure"), ("flaky (2)", "success"),
                                                      ("after", "success")]
    assert run.ok and run.jobs[0].result == "success"


def test_step_continue_on_error_has_outcome_failure_and_conclusion_success(tmp_path: Path) -> None:
    """GitHub's `steps` context: a failed step under continue-on-error has outcome failure and conclusion
    success, and the job succeeds. Before, conclusion was failure too."""
    repo = _repo(tmp_path, _one_job("""\
        - id: x
          continue-on-error: true
          run: exit 3
        - if: steps.x.outcome == 'failure' && steps.x.conclusion == 'success'
          run: echo judged > "$RUNNER_TEMP/judged"
        """))
    run = _run(repo, tmp_path)
    assert run.ok
    assert [s.status for s in run.jobs[0].steps] == ["failure", "success"]


def test_hash_files_is_the_runners_sha256_of_file_sha256s(tmp_path: Path) -> None:
    """hashFiles(patterns) hashes each matched file and then the digests, in path order, `!` excluding,
    directories skipped; no match is ''. Before, hashFiles was refused."""
    repo = _repo(tmp_path, _one_job("""\
        - uses: CHECKOUT
        - run: |
            test "${{ hashFiles('locks/*.txt', '!locks/skip.txt') }}" = "$EXPECTED"
            test -z "${{ hashFiles('nothing/**') }}"
          env:
            EXPECTED: EXPECTED_HASH
        """))
    (repo / "locks" / "sub").mkdir(parents=True)
    files = {"locks/a.txt": b"alpha\n", "locks/b.txt": b"beta\n", "locks/skip.txt": b"left out\n"}
    for name, content in files.items():
        (repo / name).write_bytes(content)
    expected = hashlib.sha256(hashlib.sha256(b"alpha\n").digest() + hashlib.sha256(b"beta\n").digest()).hexdigest()
    workflow = repo / ".github" / "workflows" / "release.yml"
    workflow.write_text(workflow.read_text().replace("EXPECTED_HASH", expected))
    run = _run(repo, tmp_path)
    assert run.ok, run.jobs[0].detail
