"""Who may write: the tokens the server was given, or one it made and keeps in `<root>/token` (mode 0600).

Read tokens (`ReadScope`) stand for the Hub's fine-grained read-only tokens: each reads the private repos
it names (and every public one), and is refused (403) anything that writes: the credential the release
workflow's eval jobs get for gated or private sources (`HF_READ_TOKEN`).

The token itself is never printed or logged; only the path of the file holding it is announced.
LFS upload URLs carry no Authorization header (huggingface_hub PUTs to them like to a presigned S3 URL), so
they are signed with an HMAC key kept in `<root>/lfs-signing-key` instead.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hfrelease.hub import errors

TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
SIGNING_KEY_FILE = "lfs-signing-key"
DEFAULT_USER = "hfrelease"

# huggingface_hub treats exactly this message on a 401 as "bad token", not as "repository not found".
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"


def _read_or_create_secret(path: Path, make: str) -> str:
    """Read a secret file, or create it with mode 0600 from the start (never world-readable, not even briefly)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(make + "\n")
    return make


@dataclass(frozen=True)
class Credentials:
    user: str
    tokens: frozenset[str]
    token_file: Path | None  # set when the server made (or reused) its own token

    @classmethod
    def load(cls, root: Path, tokens: Sequence[str], *, user: str = DEFAULT_USER) -> Credentials:
        if tokens:
            return cls(user=user, tokens=frozenset(tokens), token_file=None)
        path = root / TOKEN_FILE
        # Reusing the stored token keeps clients working across restarts of the same root.
        token = _read_or_create_secret(path, f"hf_{secrets.token_urlsafe(30)}")
        return cls(user=user, tokens=frozenset([token]), token_file=path)

    def authenticate(self, authorization: str | None) -> str | None:
        """The user behind an `Authorization: Bearer` header, None if anonymous; 401 if the token is unknown."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise errors.unauthorized(INVALID_CREDENTIALS)
        if any(hmac.compare_digest(token.encode(), known.encode()) for known in self.tokens):
            return self.user
        raise errors.unauthorized(INVALID_CREDENTIALS)


@dataclass(frozen=True)
class ReadScope:
    """A read-only token's reach: the private repos it may read; it writes nothing."""

    repos: frozenset[str]

    def user_for(self, *, user: str, repo: str | None, access: str) -> str | None:
        """Who the token is for this request: `user` on its own repos, anonymous on any other (a private one
        then looks missing, as to anyone); a write, or an account action, is refused."""
        if access not in ("anyone", "read"):
            raise errors.forbidden("This token is read-only: it cannot write or act for its user")
        return user if repo in self.repos else None


def read_scopes(tokens: Mapping[str, Sequence[str]]) -> dict[str, ReadScope]:
    """Each read token with the private repos it may read."""
    return {token: ReadScope(frozenset(repos)) for token, repos in tokens.items()}


def read_scope_of(scopes: Mapping[str, ReadScope], authorization: str | None) -> ReadScope | None:
    """The scope of a read token in an `Authorization: Bearer` header, or None (not a read token)."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return next((scope for known, scope in scopes.items() if hmac.compare_digest(token.encode(), known.encode())),
                None)


class UrlSigner:
    """Signs the LFS upload URLs the batch endpoint hands out, so only those URLs accept content."""

    def __init__(self, root: Path) -> None:
        self._key = _read_or_create_secret(root / SIGNING_KEY_FILE, secrets.token_hex(32)).encode()

    def sign(self, *parts: str) -> str:
        return hmac.new(self._key, "\n".join(parts).encode(), hashlib.sha256).hexdigest()

    def verify(self, signature: str, *parts: str) -> bool:
        return hmac.compare_digest(signature, self.sign(*parts))
