"""A publish job that stops anywhere is finished by running it again, with the new attestation a re-run makes.

On GitHub the publish job attests every MANIFEST with `actions/attest`, then runs `hfrelease publish
--from-bundle DIR --attestation BUNDLE` and `hfrelease verify`. Re-running the job (the same bundle
artifact) makes a second attestation of the same MANIFESTs: other bytes (certificate, signature, log entry),
the same subjects. Each test here stops a real publish -- huggingface_hub's real client against the
built-in Hub -- at one point where a job can stop, then runs it again with a second attestation, and the
release must complete: every repo tagged once on the bundle, each attestation naming its MANIFEST, `verify`
clean. The stops are a process that ends (runner lost, the job's `timeout-minutes`, a cancel: `RunnerLost`,
raised from the progress events, which no handler of the publish code catches), and the built-in Hub's
own fault injection (`hfrelease.hub.faults`: a dropped connection, a stalled answer, a failed read) where
the real Hub cannot fail on demand.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hfrelease.bundle import ATTESTATION_NAME, MANIFEST_NAME, bundle_family, write_bundle
from hfrelease.errors import ExitCode, HfreleaseError, PublishError
from hfrelease.hub import FaultRule, HubServer
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.publish import publish_family
from hfrelease.publish.attestation import attestation_problems
from hfrelease.publish.events import PublishEvent, StepDone
from hfrelease.publish.family import PublishReport
from hfrelease.publish.readback import verification_error, verify_family
from tests.publish.test_attestation import sigstore_bundle
from tests.publish_family import TOKEN, fake_plugin_check


class RunnerLost(BaseException):
    """The job's process ends here: nothing after this point runs, and no `except Exception` sees it."""


@pytest.fixture
def bundle_dir(family: Path, tmp_path: Path) -> Path:
    """The bundle job's output (`hfrelease bundle --out`), which every run of the publish job downloads."""
    out = tmp_path / "release-bundle"
    write_bundle(bundle_family(load_manifest(family), plugin_checker=fake_plugin_check), out)
    return out


def attest(bundle_dir: Path, run: int) -> Path:
    """What `actions/attest` gives run `run`: the same subjects (every MANIFEST), its own signature bytes."""
    subjects = {f"{d.name}/{MANIFEST_NAME}": (d / MANIFEST_NAME).read_bytes() for d in sorted(bundle_dir.iterdir())}
    data = json.loads(sigstore_bundle(subjects))
    data["dsseEnvelope"]["signatures"] = [{"sig": base64.b64encode(f"run {run}".encode()).decode()}]
    path = bundle_dir.parent / f"attestation-{run}.sigstore.json"
    path.write_text(json.dumps(data))
    return path


def publish(family: Path, api: HfApi, bundle_dir: Path, run: int, *, stop: tuple[str, int] | None = None,
            repos: list[str] | None = None) -> PublishReport:  # fmt: skip
    """One run of the publish job; `stop` = (step, repo number): the process ends once that step is done."""

    def on_event(event: PublishEvent) -> None:
        if (
            stop is not None
            and repos is not None
            and isinstance(event, StepDone)
            and (event.step, event.repo) == (stop[0], repos[stop[1]])
        ):
            raise RunnerLost(f"runner lost after {stop[0]} of {event.repo}")

    return publish_family(load_manifest(family, check_files=False), api=api, from_bundle=bundle_dir,
                          attestation=attest(bundle_dir, run), on_event=on_event)  # fmt: skip


def _repos(family: Path) -> list[str]:
    return [a.repo for a in load_manifest(family).artifact if a.publish]


def _attestation_at(api: HfApi, repo: str, revision: str) -> bytes:
    path = api.hf_hub_download(repo, ATTESTATION_NAME, revision=revision)
    return Path(path).read_bytes()


def assert_completed(family: Path, api: HfApi, hub: HubServer, bundle_dir: Path, tmp_path: Path) -> dict[str, int]:
    """Every repo: one release commit, tagged v1.0 at main, its attestation naming its MANIFEST, nothing left
    staged, `verify` clean; one more run of the job (attestation 9) finds it all done. Returns which run's
    attestation each repo carries."""
    again = publish(family, api, bundle_dir, 9)
    assert again.outcome is not None and again.outcome.status == "already-published"
    manifest: Manifest = load_manifest(family, check_files=False)
    runs: dict[str, int] = {}
    for repo in _repos(family):
        commits = [c.commit_id for c in api.list_repo_commits(repo)]
        refs = api.list_repo_refs(repo)
        assert {t.name: t.target_commit for t in refs.tags} == {"v1.0": commits[0]}, repo
        assert [b.name for b in refs.branches] == ["main"], repo
        assert len(commits) == 2, repo  # the repo's creation, then one release commit
        signed = _attestation_at(api, repo, "v1.0")
        manifest_bytes = Path(api.hf_hub_download(repo, MANIFEST_NAME, revision="v1.0")).read_bytes()
        assert attestation_problems(signed, manifest_bytes) == []
        sig = json.loads(signed)["dsseEnvelope"]["signatures"][0]["sig"]
        runs[repo] = int(base64.b64decode(sig).decode().split()[-1])
    verified = verify_family(manifest, endpoint=hub.url, token=TOKEN, out_dir=tmp_path / "verify")
    assert {v.repo: v.problems for v in verified} == {repo: () for repo in _repos(family)}
    assert all("attestation" in v.compared_with and v.local_bundle is not None for v in verified)
    return runs


@pytest.mark.parametrize("step", ["stage", "promote", "tag"])
def test_a_publish_stopped_after_its_first_repo_is_completed_with_a_second_attestation(
    step: str, family: Path, api: HfApi, hub: HubServer, bundle_dir: Path, tmp_path: Path
) -> None:
    """The runner is lost once the first repo is staged, committed to main (untagged), or released; the
    re-run, with attestation 2, completes the release (before: a released repo's tag on attestation 1 was
    "tag v1.0 already exists on other content", exit 7, for good). A repo released (or committed to main)
    keeps attestation 1, which names the same MANIFEST; the others ship attestation 2."""
    repos = _repos(family)
    with pytest.raises(RunnerLost):
        publish(family, api, bundle_dir, 1, stop=(step, 0), repos=repos)

    report = publish(family, api, bundle_dir, 2)

    assert report.outcome is not None and report.outcome.status == "published"
    statuses = {o.repo: o.status for o in report.outcome.repos}
    first = {"stage": "published", "promote": "tagged", "tag": "already-published"}[step]
    assert statuses == {repos[0]: first, repos[1]: "published"}
    kept = 1 if step in ("promote", "tag") else 2
    assert assert_completed(family, api, hub, bundle_dir, tmp_path) == {repos[0]: kept, repos[1]: 2}


def test_a_network_error_mid_upload_is_completed_by_a_re_run(
    family: Path, api: HfApi, hub: HubServer, bundle_dir: Path, tmp_path: Path
) -> None:
    """The connection drops on the second repo's staging commit, once its weights are up: exit 7, no main or
    tag moved; the re-run (attestation 2) sends no weight byte again and completes."""
    repos = _repos(family)
    hub.faults.add(FaultRule(endpoint="commit", repo=repos[1], revision="hfrelease/staging/v1.0",
                             drop_connection=True, times=1))  # fmt: skip
    with pytest.raises(PublishError) as caught:
        publish(family, api, bundle_dir, 1)
    assert caught.value.exit_code == ExitCode.PUBLISH_FAILED and f"staging {repos[1]} failed" in caught.value.message
    assert all(not api.list_repo_refs(repo).tags for repo in repos)
    hub.reset_stats()

    report = publish(family, api, bundle_dir, 2)

    assert report.outcome is not None and report.outcome.status == "published"
    assert hub.stats()["lfs_bytes_received"] == 0
    assert assert_completed(family, api, hub, bundle_dir, tmp_path) == {repos[0]: 2, repos[1]: 2}


@pytest.fixture
def hub_timeout_1s() -> Iterator[None]:
    """hfrelease's bounded client (`hfrelease.hub_client`, as the CLI installs it) with a 1 s read timeout."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    from hfrelease.hub_client import bounded_client_factory

    before = _http._GLOBAL_CLIENT_FACTORY
    set_client_factory(bounded_client_factory(read=1.0, sleep=lambda _: None))
    yield
    set_client_factory(before)


def test_a_hub_timeout_while_promoting_is_completed_by_a_re_run(
    family: Path, api: HfApi, hub: HubServer, bundle_dir: Path, tmp_path: Path, hub_timeout_1s: None
) -> None:
    """The Hub takes longer than the read timeout on the second repo's commit to main (the first repo is
    released by then): exit 7 naming every repo's state; the re-run (attestation 2) completes, the first
    repo keeping attestation 1."""
    repos = _repos(family)
    hub.faults.add(FaultRule(endpoint="commit", repo=repos[1], revision="main", stall=2.0, drop_connection=True,
                             times=1))  # fmt: skip
    with pytest.raises(HfreleaseError) as caught:
        publish(family, api, bundle_dir, 1)
    assert caught.value.exit_code == ExitCode.PUBLISH_FAILED
    assert f"publishing {repos[1]} failed after every repo was staged" in caught.value.message

    report = publish(family, api, bundle_dir, 2)

    assert report.outcome is not None and report.outcome.status == "published"
    assert assert_completed(family, api, hub, bundle_dir, tmp_path) == {repos[0]: 1, repos[1]: 2}


def test_a_failed_verify_is_completed_by_a_re_run(
    family: Path, api: HfApi, hub: HubServer, bundle_dir: Path, tmp_path: Path
) -> None:
    """The job's `hfrelease verify` fails (the Hub answers 404 to one repo's downloads: exit 7); the re-run's publish
    (attestation 2) finds the release done and changes nothing, and its verify passes. Before: the re-run's
    publish exited 7 "tag v1.0 already exists on other content"."""
    repos = _repos(family)
    publish(family, api, bundle_dir, 1)
    tags = {repo: api.list_repo_refs(repo).tags for repo in repos}
    hub.faults.add(FaultRule(endpoint="resolve", repo=repos[1], status=404, times=None))
    failed = verify_family(load_manifest(family, check_files=False), endpoint=hub.url, token=TOKEN,
                           out_dir=tmp_path / "verify-1")  # fmt: skip
    assert [v.repo for v in failed if v.problems] == [repos[1]]
    error = verification_error(failed)
    assert error is not None and error.exit_code == ExitCode.PUBLISH_FAILED
    hub.faults.clear()
    hub.reset_stats()

    report = publish(family, api, bundle_dir, 2)

    assert report.outcome is not None and report.outcome.status == "already-published"
    assert "commit" not in hub.stats()["requests"] and "tag-create" not in hub.stats()["requests"]
    assert {repo: api.list_repo_refs(repo).tags for repo in repos} == tags
    assert assert_completed(family, api, hub, bundle_dir, tmp_path) == {repos[0]: 1, repos[1]: 1}


def test_a_failed_verify_while_staging_is_completed_by_a_re_run(
    family: Path, api: HfApi, hub: HubServer, bundle_dir: Path, tmp_path: Path
) -> None:
    """Publish's own read-back of the second repo's staged MANIFEST fails: exit 7, nothing tagged; the re-run
    (attestation 2) completes."""
    repos = _repos(family)
    hub.faults.add(FaultRule(endpoint="resolve", repo=repos[1], status=404, times=1))
    with pytest.raises(PublishError, match=f"staging {repos[1]} failed"):
        publish(family, api, bundle_dir, 1)
    assert all(not api.list_repo_refs(repo).tags for repo in repos)

    report = publish(family, api, bundle_dir, 2)

    assert report.outcome is not None and report.outcome.status == "published"
    assert assert_completed(family, api, hub, bundle_dir, tmp_path) == {repos[0]: 2, repos[1]: 2}
