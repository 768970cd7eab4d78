"""`release --hub local` sees what a runner sees (issue 27, part 4): the pinned vendor repos on its Hub, and no
Hugging Face cache of this machine's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hfrelease.ci.rehearsal import rehearse
from hfrelease.errors import ConfigError, ExitCode
from hfrelease.publish import LOCAL

VENDOR = "vendor/tiny-base"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _vendor_sourced(family: Path) -> None:
    """The fixture family's reference sourced as a vendor's Hub repo at a pinned commit."""
    manifest = family / "release.toml"
    text = manifest.read_text()
    assert 'source = { path = "checkpoints/ref" }' in text
    manifest.write_text(text.replace('source = { path = "checkpoints/ref" }',
                                     f'source = {{ hub = "{VENDOR}", revision = "{REVISION}" }}'))


def _workflow(root: Path, job: str) -> None:
    """A release.yml for the family in `root/family` whose one job runs `job` (a shell script)."""
    path = root / ".github" / "workflows" / "release.yml"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent("""\
        name: release
        on: {push: {tags: ["v*"]}}
        permissions: {}
        env:
          MANIFEST: family/release.toml
        jobs:
          one:
            runs-on: ubuntu-latest
            steps:
              - run: |
        """) + textwrap.indent(job, " " * 10))


def test_a_pinned_vendor_repo_missing_from_the_local_hub_stops_the_rehearsal(fixture_family: Path,
                                                                             tmp_path: Path) -> None:
    """A fresh built-in Hub holds no vendor repo: exit 3 before any job, naming the repo and `--hub URL`.

    Before, the check job failed at the Hub lookup or, with the machine's HF cache, the eval jobs passed."""
    _vendor_sourced(fixture_family)
    _workflow(tmp_path, "true\n")
    with pytest.raises(ConfigError) as caught:
        rehearse(fixture_family, work_dir=tmp_path / "work", hub=LOCAL, tag="v0.9", env={})
    error = caught.value
    assert error.exit_code == ExitCode.CONFIG
    assert [p.location for p in error.problems] == ["artifact[0].source.hub"]
    assert f"{VENDOR}@{REVISION[:12]} is not on the rehearsal's built-in Hub" in error.problems[0].message
    assert error.hint is not None and "--hub URL" in error.hint and "--hub-root" in error.hint
    assert not (tmp_path / "work" / "jobs").exists()  # no job ran


def test_jobs_get_an_empty_hf_home_of_their_own_and_no_cache_of_this_machine(fixture_family: Path,
                                                                             tmp_path: Path) -> None:
    """Each job's HF_HOME is an empty directory of its own; HF_HUB_CACHE and friends of this machine are not
    passed on, so a Hub source the runner could not download is never found in a local cache."""
    cache = tmp_path / "machine-cache"
    (cache / "models--vendor--tiny-base").mkdir(parents=True)
    _workflow(tmp_path, textwrap.dedent("""\
        test -z "${HF_HUB_CACHE:-}" && test -z "${HF_DATASETS_CACHE:-}" && test -z "${HF_TOKEN_PATH:-}"
        test -d "$HF_HOME" && test -z "$(ls -A "$HF_HOME")"
        case "$HF_HOME" in "$RUNNER_TEMP"/*) ;; *) exit 1 ;; esac
        """))
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "machine-home"),
           "HF_DATASETS_CACHE": str(cache), "HF_TOKEN_PATH": str(tmp_path / "token")}
    report = rehearse(fixture_family, work_dir=tmp_path / "work", hub=LOCAL, tag="v0.9", env=env)
    assert [(j.id, j.status) for j in report.jobs] == [("one", "success")], report.error
