"""Trusted publishing on the built-in Hub: an OIDC id token exchanged for a short-lived token scoped to one repo.

The real Hub's exchange, as huggingface_hub's client speaks it (`huggingface_hub._oidc`, RFC 8693):

    POST /oauth/token  {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                        "subject_token": <the CI's id token (JWT)>, "resource": "<namespace>/<name>"}
    -> {"access_token": ..., "token_type": "bearer", "expires_in": 3600, "resource": ...}

The id token must be for this Hub (`aud` = its URL), unexpired, and match a trusted publisher of the
repo named by `resource`: the GitHub repository, the workflow file and (when set) the environment. The
token handed back may read and write that repo only: creating a repo, a collection, or touching any
other repo with it is refused (403), as on the Hub, where a repo-scoped token carries no user rights.

There is no GitHub here to sign id tokens, so the server plays that part for tests and rehearsals:
`GET /_hfrelease/oidc/github?audience=...` with the request token answers as GitHub Actions'
`ACTIONS_ID_TOKEN_REQUEST_URL` does (`{"value": <JWT>}`), signed (HS256) with a key only the server and its
`OidcSettings` hold, carrying the claims `OidcSettings.claims` describes (the workflow run it stands for).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hfrelease.hub import errors

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"  # noqa: S105 - a URN, not a secret
ISSUER = "https://token.actions.githubusercontent.com"
TOKEN_SECONDS = 3600


@dataclass(frozen=True, kw_only=True)
class TrustedPublisher:
    """A repo's trust in one GitHub workflow (the repo's Settings > Trusted publishers on the Hub)."""

    repo: str  # namespace/name
    repository: str  # owner/name on GitHub
    workflow: str  # the workflow file's name, e.g. release.yml
    environment: str | None = None  # when set, the job must run in this environment


@dataclass(frozen=True, kw_only=True)
class OidcSettings:
    """Who the server trusts, and the identity of the CI run its id-token endpoint stands for."""

    publishers: tuple[TrustedPublisher, ...]
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    request_token: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    claims: Mapping[str, str] = field(default_factory=dict)  # repository, environment, job_workflow_ref, ...


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_jwt(claims: Mapping[str, Any], key: bytes) -> str:
    """An HS256 JWT of `claims`."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(dict(claims), sort_keys=True).encode())
    signature = hmac.new(key, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def read_jwt(token: str, key: bytes) -> dict[str, Any]:
    """The claims of an HS256 JWT signed with `key`; 401 when it is malformed or the signature is wrong."""
    try:
        header, body, signature = token.split(".")
        expected = hmac.new(key, f"{header}.{body}".encode(), hashlib.sha256).digest()
        if json.loads(_unb64(header)).get("alg") != "HS256" or not hmac.compare_digest(_unb64(signature), expected):
            raise ValueError("bad signature")
        claims = json.loads(_unb64(body))
    except (ValueError, json.JSONDecodeError, UnicodeDecodeError):
        raise errors.unauthorized("Invalid id token: not signed by a trusted issuer") from None
    if not isinstance(claims, dict):
        raise errors.unauthorized("Invalid id token")
    return claims


@dataclass(frozen=True)
class _Scoped:
    repo: str
    expires: float


class OidcExchange:
    """The exchange endpoint's state: the trust settings and the repo-scoped tokens it has handed out."""

    def __init__(self, settings: OidcSettings, *, clock: Any = time.time) -> None:
        self.settings = settings
        self._clock = clock
        self._tokens: dict[str, _Scoped] = {}
        self._lock = threading.Lock()

    def id_token(self, *, audience: str, authorization: str | None) -> dict[str, str]:
        """GitHub Actions' id-token endpoint, for the run `settings.claims` describes."""
        expected = f"Bearer {self.settings.request_token}"
        if not authorization or not hmac.compare_digest(authorization.encode(), expected.encode()):
            raise errors.unauthorized("Invalid request token")
        now = int(self._clock())
        claims = {"iss": ISSUER, "aud": audience, "iat": now, "exp": now + 300, **self.settings.claims}
        return {"value": sign_jwt(claims, self.settings.key)}

    def exchange(self, body: Mapping[str, Any], *, audience: str) -> dict[str, Any]:
        """RFC 8693 token exchange: a token for `body["resource"]`, or 400/401/403 saying why not."""
        if body.get("grant_type") != GRANT_TYPE or body.get("subject_token_type") != ID_TOKEN_TYPE:
            raise errors.bad_request("unsupported_grant_type: expected an RFC 8693 exchange of an id token")
        resource, subject = body.get("resource"), body.get("subject_token")
        if not isinstance(resource, str) or not isinstance(subject, str):
            raise errors.bad_request("invalid_request: resource and subject_token are required")
        claims = read_jwt(subject, self.settings.key)
        if claims.get("iss") != ISSUER or claims.get("aud") != audience:
            raise errors.unauthorized(f"Invalid id token: its audience must be {audience}")
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= self._clock():
            raise errors.unauthorized("Invalid id token: expired")
        if not any(self._trusts(p, claims) for p in self.settings.publishers if p.repo == resource):
            raise errors.forbidden(f"No trusted publisher of {resource} matches this workflow run (repository "
                                   f"{claims.get('repository')!r}, environment {claims.get('environment')!r})")
        token = f"hf_oidc_{secrets.token_urlsafe(24)}"
        with self._lock:
            self._tokens[token] = _Scoped(repo=resource, expires=self._clock() + TOKEN_SECONDS)
        return {"access_token": token, "token_type": "bearer", "expires_in": TOKEN_SECONDS, "resource": resource,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}

    @staticmethod
    def _trusts(publisher: TrustedPublisher, claims: Mapping[str, Any]) -> bool:
        workflow_ref = str(claims.get("job_workflow_ref") or claims.get("workflow_ref") or "")
        return (claims.get("repository") == publisher.repository
                and f"{publisher.repository}/.github/workflows/{publisher.workflow}@" in workflow_ref
                and (publisher.environment is None or claims.get("environment") == publisher.environment))

    def scope(self, token: str) -> str | None:
        """The repo a token it handed out is scoped to; None for a token it does not know; 401 once expired."""
        with self._lock:
            scoped = self._tokens.get(token)
        if scoped is None:
            return None
        if scoped.expires <= self._clock():
            raise errors.unauthorized("Invalid credentials in Authorization header")
        return scoped.repo


def check_scope(scope: str, *, repo: str | None, access: str) -> None:
    """Refuse (403) what a token scoped to `scope` may not do: anything but reading or writing that repo, or
    what anyone may do without a repo (huggingface_hub's create_commit posts its card to /api/validate-yaml)."""
    if access == "anyone" and repo is None:
        return
    if repo != scope or access not in ("anyone", "read", "write"):
        raise errors.forbidden(f"This token is scoped to {scope} (trusted publishing): it cannot do this")


def trusted_publishers(repos: Sequence[str], *, repository: str, workflow: str = "release.yml",
                       environment: str | None = "release") -> tuple[TrustedPublisher, ...]:
    """The same publisher trusted on each of `repos`."""
    return tuple(TrustedPublisher(repo=r, repository=repository, workflow=workflow, environment=environment)
                 for r in repos)
