"""`--since previous`: the family's newest release tag, read from the built-in Hub with huggingface_hub's client."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hfrelease.compare.previous import NoPreviousRelease, previous_release, tag_names
from hfrelease.hub import HubServer
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.stages.cards import LintSettings, lint_stage
from tests.conftest import ROOT, CliRun
from tests.publish_family import TOKEN

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("publish_isolation")]

Q0, Q1 = "alice/Tiny-1M-Q0", "alice/Tiny-1M-Q1"  # the tiny family's published repos (tests/publish_family.py)


def _commit(api: HfApi, repo: str, text: str) -> str:
    """A commit on main of `repo` (created if needed); its id."""
    api.create_repo(repo, exist_ok=True)
    return api.upload_file(path_or_fileobj=text.encode(), path_in_repo="notes.txt", repo_id=repo).oid


def _release(api: HfApi, tag: str, *repos: str) -> None:
    """What a release leaves in each repo: a commit on main, tagged."""
    for repo in repos:
        api.create_tag(repo, tag=tag, revision=_commit(api, repo, f"{repo} {tag}"))


def test_a_family_never_released_has_no_previous_release(manifest: Manifest, api: HfApi, hub: HubServer) -> None:
    """No repo yet (asked with a token and without one), then repos without tags: a first release, not a Hub failure."""
    for client in (api, HfApi(endpoint=hub.url, token=False)):
        with pytest.raises(NoPreviousRelease, match="a first release"):
            previous_release(manifest, client)
    _commit(api, Q0, "weights")
    _commit(api, Q1, "weights")
    with pytest.raises(NoPreviousRelease):
        previous_release(manifest, api)


def test_a_caller_without_a_token_reads_the_public_repos(
    family: Path, manifest: Manifest, api: HfApi, hub: HubServer
) -> None:
    """The render job reads without a token: a private repo (the Hub hides it behind 401) counts as absent, and the
    previous release is read from the public ones, its ledger included."""
    from hfrelease.compare import read_side
    from tests.ledger_pairs import gate_record, write_ledger

    write_ledger(family / "results", gate_record(family="tiny", artifact="q0", accuracy=0.5))
    api.create_repo(Q1, private=True)
    _release(api, "v0.9", Q1)
    api.create_repo(Q0)
    commit = api.upload_folder(repo_id=Q0, folder_path=family / "results" / "q0", path_in_repo="ledger").oid
    api.create_tag(Q0, tag="v0.8", revision=commit)
    anonymous = HfApi(endpoint=hub.url, token=False)
    assert previous_release(manifest, anonymous) == "v0.8"
    side = read_side("previous", work=family / "read", manifest=manifest, endpoint=hub.url, token=None)
    assert side.label == "v0.8" and [r.artifact_id for r in side.records] == ["q0"]


def test_one_release_is_the_previous_one(manifest: Manifest, api: HfApi) -> None:
    """The only release tag of the family, with later commits on main after it."""
    _release(api, "v0.9", Q0, Q1)
    _commit(api, Q0, "a later fix on main")
    assert previous_release(manifest, api) == "v0.9"


def test_the_newest_release_is_read_from_history_not_from_names(manifest: Manifest, api: HfApi) -> None:
    """v0.10 released after v0.9 is the previous release, though "v0.9" sorts after it by name."""
    _release(api, "v0.9", Q0, Q1)
    _release(api, "v0.10", Q0, Q1)
    assert previous_release(manifest, api) == "v0.10"
    assert tag_names(api, [Q0, Q1]) == ["v0.10", "v0.9"]


def test_a_release_some_repos_lack_is_still_found(manifest: Manifest, api: HfApi) -> None:
    """An artifact added in v0.9 (Q1 lacks v0.8) and one left out of v0.9 (Q1 keeps v0.8 only): v0.9 either way."""
    _release(api, "v0.8", Q0)
    _release(api, "v0.9", Q0, Q1)
    assert previous_release(manifest, api) == "v0.9"
    api.delete_tag(Q1, tag="v0.9")
    api.create_tag(Q1, tag="v0.8", revision=_commit(api, Q1, "the old release"))
    # Q1's newest tag is v0.8, committed after Q0's v0.9: Q0 holds both and puts v0.9 nearer its head.
    assert previous_release(manifest, api) == "v0.9"


def test_a_rerun_leaves_the_tag_being_released_out(manifest: Manifest, api: HfApi) -> None:
    """Re-running the v1.0 release after its publish tagged Q0: the previous release is still v0.9."""
    assert manifest.tag_name() == "v1.0"
    _release(api, "v0.9", Q0, Q1)
    _release(api, "v1.0", Q0)
    assert previous_release(manifest, api) == "v0.9"


def test_releases_no_repo_shares_are_ordered_by_their_commits_time(manifest: Manifest, api: HfApi) -> None:
    """Q0 holds only v9.0, Q1 only v0.1 (committed later): no repo orders them, so the later commit wins."""
    _release(api, "v9.0", Q0)
    _release(api, "v0.1", Q1)
    assert previous_release(manifest, api) == "v0.1"


def test_tags_not_named_as_releases_are_not_releases(manifest: Manifest, api: HfApi) -> None:
    """A vendor's own tag (not `[publish].tag`'s v{version}) nearer the head is passed over."""
    _release(api, "v0.9", Q0, Q1)
    _release(api, "upstream-2026-11", Q0, Q1)
    assert previous_release(manifest, api) == "v0.9"


def _lint(family: Path, *, since: str | None) -> tuple[str, ...]:
    """What `check --cards [--since SINCE]` finds (its stage: the copy's checkpoints are not here to validate)."""
    settings = LintSettings(since=since)
    return lint_stage(load_manifest(family, check_files=False), settings).problems


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    """A copy of the committed demo family (v0.1, its recorded ledger) to render into."""
    return Path(shutil.copytree(ROOT / "model_cards" / "demo", tmp_path / "demo"))


def test_render_since_previous_on_a_first_release_renders_without_the_section(
    demo_copy: Path, hub: HubServer, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No release of the demo on the Hub: the cards render without "Changes since", and stderr says why."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # `check --cards` reads the Hub the workflow's jobs are given
    code, _, err = cli(["render", str(demo_copy), "--no-plots", "--since", "previous", "--hub", hub.url])
    assert code == 0, err
    assert "a first release" in err and "no 'Changes since' section" in err
    assert "Changes since" not in (demo_copy / "draft" / "README.md").read_text()
    assert not _lint(demo_copy, since="previous")


def test_render_since_previous_compares_with_the_demos_v0_0_release(
    demo_copy: Path, api: HfApi, hub: HubServer, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v0.0's ledger (the fixture) published as the reference's ledger/ at v0.0: the cards say "Changes since v0.0"
    and lint clean against the same comparison; a tag no repo has is exit 2, naming the tags there are."""
    manifest = load_manifest(demo_copy, check_files=False)
    reference = next(a.repo for a in manifest.artifact if a.id == "reference")
    api.create_repo(reference)
    commit = api.upload_folder(repo_id=reference, folder_path=ROOT / "tests" / "fixtures" / "ledger_demo_v0.0" /
                               "reference", path_in_repo="ledger").oid
    api.create_tag(reference, tag="v0.0", revision=commit)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # `check --cards` reads the Hub the workflow's jobs are given
    code, _, err = cli(["render", str(demo_copy), "--no-plots", "--since", "previous", "--hub", hub.url])
    assert code == 0, err
    assert "## Changes since v0.0" in (demo_copy / "draft" / "README.md").read_text()
    assert not _lint(demo_copy, since="previous")
    # The section's numbers need the comparison: linted without it, one problem names the release to check with.
    assert any("rendered with `render --since v0.0`" in p and "check with `--since v0.0`" in p
               for p in _lint(demo_copy, since=None))
    code, _, err = cli(["render", str(demo_copy), "--no-plots", "--since", "v9.9", "--hub", hub.url])
    assert code == 2 and "no release tag 'v9.9'" in err and "v0.0" in err.split("no release tag 'v9.9'", 1)[1]
