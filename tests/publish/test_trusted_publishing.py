"""Trusted publishing against the built-in Hub with huggingface_hub's own OIDC client: one token per repo."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub._oidc import oidc_login
from huggingface_hub.errors import HfHubHTTPError

from hfrelease.errors import PublishError
from hfrelease.hub import HubServer, serve
from hfrelease.hub.oidc import OidcSettings, sign_jwt, trusted_publishers
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from hfrelease.publish.trusted import SOURCE, exchange_per_repo
from tests.publish_family import TOKEN, fake_plugin_check

REPOS = ("alice/Tiny-1M-Q0", "alice/Tiny-1M-Q1")
RUN = {"repository": "acme/family", "environment": "release",
       "job_workflow_ref": "acme/family/.github/workflows/release.yml@refs/tags/v1.0"}


@pytest.fixture
def settings() -> OidcSettings:
    """The Hub trusts acme/family's release.yml in environment `release` on both repos; the run is that one."""
    return OidcSettings(publishers=trusted_publishers(REPOS, repository="acme/family"), claims=RUN)


@pytest.fixture
def oidc_hub(tmp_path: Path, settings: OidcSettings) -> Iterator[HubServer]:
    server = serve(tmp_path / "hub", tokens=[TOKEN], oidc=settings)
    user = HfApi(endpoint=server.url, token=TOKEN)
    for repo in REPOS:  # a repo must exist to trust a publisher: its first release used the fallback token
        user.create_repo(repo)
    yield server
    server.shutdown()


@pytest.fixture
def github_actions(monkeypatch: pytest.MonkeyPatch, oidc_hub: HubServer, settings: OidcSettings) -> None:
    """This process looks like a GitHub Actions job with `id-token: write` (the Hub mints its id tokens)."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", f"{oidc_hub.url}/api/_hfrelease/oidc/github")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", settings.request_token)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_OIDC_ID_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _add(api: HfApi, repo: str, text: str) -> None:
    api.create_commit(repo, [CommitOperationAdd("note.txt", text.encode())], commit_message="note")


@pytest.mark.usefixtures("github_actions")
def test_an_exchanged_token_writes_its_repo_and_nothing_else(oidc_hub: HubServer) -> None:
    """huggingface_hub's oidc_login gets a token that commits to its repo; another repo or a new repo is 403."""
    result = oidc_login(resource=REPOS[0], endpoint=oidc_hub.url)
    assert result["expires_in"] == 3600 and result["token_type"] == "bearer"
    scoped = HfApi(endpoint=oidc_hub.url, token=result["access_token"])
    _add(scoped, REPOS[0], "released by the workflow")
    for attempt in (lambda: _add(scoped, REPOS[1], "not mine"), lambda: scoped.create_repo("alice/new-one"),
                    lambda: scoped.create_collection("mine", namespace="alice")):
        with pytest.raises(HfHubHTTPError) as info:
            attempt()
        assert info.value.response.status_code == 403


@pytest.mark.usefixtures("github_actions")
@pytest.mark.parametrize("claims", [{"environment": "staging"}, {"repository": "mallory/family"},
                                    {"job_workflow_ref": "acme/family/.github/workflows/other.yml@refs/heads/x"}])
def test_a_run_the_repo_does_not_trust_gets_no_token(oidc_hub: HubServer, settings: OidcSettings,
                                                     claims: dict[str, str]) -> None:
    """Another environment, repository or workflow file: the exchange is refused (403)."""
    forged = sign_jwt({"iss": "https://token.actions.githubusercontent.com", "aud": oidc_hub.url,
                       "exp": 4_000_000_000, **RUN, **claims}, settings.key)
    with pytest.raises(HfHubHTTPError) as info:
        oidc_login(resource=REPOS[0], endpoint=oidc_hub.url, subject_token=forged)
    assert info.value.response.status_code == 403


@pytest.mark.usefixtures("github_actions")
def test_an_id_token_signed_by_someone_else_or_for_another_hub_is_refused(oidc_hub: HubServer,
                                                                          settings: OidcSettings) -> None:
    """A JWT with the wrong signature, or an audience other than this Hub, is 401."""
    claims = {"iss": "https://token.actions.githubusercontent.com", "exp": 4_000_000_000, **RUN}
    for token in (sign_jwt({**claims, "aud": oidc_hub.url}, b"not the key"),
                  sign_jwt({**claims, "aud": "https://huggingface.co"}, settings.key)):
        with pytest.raises(HfHubHTTPError) as info:
            oidc_login(resource=REPOS[0], endpoint=oidc_hub.url, subject_token=token)
        assert info.value.response.status_code == 401


@pytest.mark.usefixtures("github_actions")
def test_one_exchange_per_repo_and_a_refusal_names_the_repo(oidc_hub: HubServer) -> None:
    """exchange_per_repo gets one token per repo; a repo with no trusted publisher is a PublishError naming it."""
    tokens = exchange_per_repo(REPOS, endpoint=oidc_hub.url)
    assert list(tokens) == list(REPOS) and len({t.value for t in tokens.values()}) == 2
    with pytest.raises(PublishError) as info:
        exchange_per_repo(["alice/untrusted"], endpoint=oidc_hub.url)
    assert "alice/untrusted" in info.value.message and "HF_TOKEN" in (info.value.hint or "")


@pytest.mark.usefixtures("github_actions")
def test_a_family_publishes_with_one_token_per_repo(family: Path, oidc_hub: HubServer) -> None:
    """With no HF_TOKEN in a job that can mint id tokens, every repo is released with its own scoped token."""
    report = publish_family(load_manifest(family), hub=oidc_hub.url, plugin_checker=fake_plugin_check, dry_run=False)
    assert report.token_source == SOURCE
    assert report.outcome is not None and report.outcome.status == "published"
    assert oidc_hub.stats()["requests"]["oidc-exchange"] == len(REPOS)
    user = HfApi(endpoint=oidc_hub.url, token=TOKEN)
    for repo in REPOS:
        assert [t.name for t in user.list_repo_refs(repo).tags] == ["v1.0"]
