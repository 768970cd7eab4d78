"""Trusted publishing for a family: one OIDC exchange per repo, each token used for its own repo only.

The Hub's trusted publishing (huggingface_hub >= 1.19, `huggingface_hub._oidc`) exchanges the CI job's
OIDC id token for a short-lived token scoped to *one* repo (`HF_OIDC_RESOURCE` names it when
huggingface_hub does the exchange itself). A family publishes several repos, so hfrelease does the
exchange once per repo, through huggingface_hub's own client (`oidc_login`: it mints the id token from
GitHub Actions, or takes `HF_OIDC_ID_TOKEN`), and `RepoScopedApi` sends each request for a repo with that
repo's token and no other: a request for another repo, or for no repo (a collection), carries none.

It is used when the job can get an id token (GitHub Actions with `id-token: write`, or `HF_OIDC_ID_TOKEN`)
and no long-lived token was given (`HF_TOKEN` unset or empty): the environment's HF_TOKEN secret stays the
fallback (a repo's first release, before the repo exists to trust a publisher; the collection, which a
repo-scoped token cannot change).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from huggingface_hub import HfApi

from hfrelease.errors import PublishError
from hfrelease.publish.tokens import Token

SOURCE = "trusted publishing (one OIDC token per repo)"

# The HfApi methods publish and verify call for one repo; each gets that repo's token.
_REPO_METHODS = (
    "list_repo_refs", "change_discussion_status", "create_tag", "delete_branch", "hf_hub_download", "create_repo",
    "repo_info", "list_repo_tree", "list_repo_commits", "list_repo_files", "create_commit", "create_branch",
    "get_repo_discussions", "snapshot_download", "get_paths_info", "preupload_lfs_files", "create_pull_request",
    "comment_discussion", "file_exists", "model_info",
)  # fmt: skip


def available(env: Mapping[str, str] | None = None) -> bool:
    """Whether to publish with trusted publishing: an id token can be had and no long-lived token was given."""
    source = os.environ if env is None else env
    if source.get("HF_TOKEN") or source.get("HUGGING_FACE_HUB_TOKEN") or source.get("HF_OIDC_RESOURCE"):
        return False  # a token given (or huggingface_hub's own single-repo exchange) takes precedence
    github = source.get("ACTIONS_ID_TOKEN_REQUEST_URL") and source.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    return bool(source.get("HF_OIDC_ID_TOKEN") or (source.get("GITHUB_ACTIONS") == "true" and github))


def _oidc_login(*, resource: str, endpoint: str, subject_token: str | None) -> dict[str, Any]:
    from huggingface_hub._oidc import oidc_login

    return oidc_login(resource=resource, endpoint=endpoint, subject_token=subject_token)


def exchange_per_repo(
    repos: Sequence[str], *, endpoint: str, env: Mapping[str, str] | None = None,
    login: Callable[..., dict[str, Any]] = _oidc_login,
) -> dict[str, Token]:  # fmt: skip
    """One exchange per repo: its short-lived token, by repo. Any refusal names the repo and what to set."""
    source = os.environ if env is None else env
    tokens = {}
    for repo in dict.fromkeys(repos):
        try:
            result = login(resource=repo, endpoint=endpoint, subject_token=source.get("HF_OIDC_ID_TOKEN") or None)
            value = str(result["access_token"])
        except Exception as error:  # huggingface_hub's OIDCError, an HTTP error, a malformed answer
            raise PublishError(
                f"trusted publishing: the Hub gave no token for {repo}: {error}",
                hint=f"Add this workflow as a trusted publisher of {repo} on the Hub (its Settings > Trusted "
                     "publishers: repository, workflow file, environment), or give the environment an HF_TOKEN "
                     "secret (a repo's first release needs it: a repo that does not exist trusts no one)."
            ) from error
        tokens[repo] = Token(value, f"{SOURCE}: {repo}")
    return tokens


def _scoped(name: str) -> Callable[..., Any]:
    base = getattr(HfApi, name)

    @functools.wraps(base)
    def call(self: RepoScopedApi, *args: Any, **kwargs: Any) -> Any:
        repo = kwargs["repo_id"] if "repo_id" in kwargs else (args[0] if args else None)
        if kwargs.get("token") is None:
            kwargs["token"] = self.token_for(repo)
        return base(self, *args, **kwargs)

    return call


class RepoScopedApi(HfApi):
    """An HfApi that sends each repo's requests with that repo's token, and any other request with none."""

    def __init__(self, *, endpoint: str, tokens: Mapping[str, Token]) -> None:
        super().__init__(endpoint=endpoint, token=False)
        self._tokens = dict(tokens)

    def token_for(self, repo: object) -> str | bool:
        token = self._tokens.get(str(repo)) if repo is not None else None
        return token.value if token is not None else False


for _name in _REPO_METHODS:
    setattr(RepoScopedApi, _name, _scoped(_name))
