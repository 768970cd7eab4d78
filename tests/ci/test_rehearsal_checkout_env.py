"""`release` runs its jobs as GitHub would (issue 28, part 2): on the committed tree, with the runner's own
environment and only the `env`/secrets the workflow declares; `--write-workflow` writes the locks it names."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hfrelease.ci.rehearsal import rehearse, write_release_workflow
from hfrelease.publish import LOCAL
from tests.ci.planted import write_workflow

CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


def test_a_job_sees_the_commit_and_only_the_env_and_secrets_the_workflow_declares(fixture_family: Path,
                                                                                    tmp_path: Path) -> None:
    """A dummy HF_TOKEN, another token and a cloud key in this shell reach no job; the workflow's `env` and
    the `secrets.HF_TOKEN` a step names do. The job's tree is HEAD's; the report names the commit and the
    untracked file no job saw. Before, every variable of this shell but HF_TOKEN reached the jobs and the
    work tree on disk was copied."""
    write_workflow(tmp_path, """\
        one:
          runs-on: ubuntu-latest
          env: {JOB_LEVEL: yes-job}
          steps:
            - uses: CHECKOUT
            - env:
                STEP_TOKEN: ${{ secrets.HF_TOKEN }}
              run: |
                test -z "${HF_TOKEN:-}" && test -z "${OTHER_SERVICE_TOKEN:-}"
                test -z "${AWS_SECRET_ACCESS_KEY:-}" && test -z "${MAINTAINER_NOTE:-}"
                test "$DECLARED" = yes-workflow && test "$JOB_LEVEL" = yes-job && test -n "$STEP_TOKEN"
                test -f family/release.toml && test ! -e notes.txt
                test "$OMP_NUM_THREADS" = 2
        """.replace("CHECKOUT", CHECKOUT), env="DECLARED: yes-workflow\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "family", ".github")
    _git(tmp_path, "commit", "-q", "-m", "family")
    (tmp_path / "notes.txt").write_text("not committed\n")
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_dummy_parent_token", "OTHER_SERVICE_TOKEN": "x" * 20,
           "AWS_SECRET_ACCESS_KEY": "y" * 20, "MAINTAINER_NOTE": "private", "OMP_NUM_THREADS": "2"}
    report = rehearse(fixture_family, work_dir=tmp_path / "work", hub=LOCAL, tag="v0.9", env=env)
    assert [(j.id, j.status, j.detail) for j in report.jobs] == [("one", "success", "")]
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert report.commit == head and report.uncommitted == ("notes.txt",)
    assert f"commit {head[:12]}" in report.checkout_note() and "notes.txt" in report.checkout_note()


def test_write_workflow_writes_the_locks_its_install_steps_read(fixture_family: Path, tmp_path: Path) -> None:
    """`release --write-workflow` on a repository without the lock files writes them where the workflow reads
    them (GitHub's install step fails without them); an existing lock is kept. Before, only release.yml."""
    workflow = write_release_workflow(fixture_family, root=tmp_path)
    text = workflow.read_text()
    assert 'HFRELEASE_LOCK: ".github/locks/release-cpu.txt"' in text
    lock = tmp_path / ".github" / "locks" / "release-cpu.txt"
    assert lock.is_file() and "--hash=sha256:" in lock.read_text()
    lock.write_text("# mine\n")
    write_release_workflow(fixture_family, root=tmp_path)
    assert lock.read_text() == "# mine\n"
