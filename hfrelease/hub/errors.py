"""Errors of the built-in Hub server.

`HubHTTPError` never leaves the server: the HTTP layer turns it into the status code, `X-Error-Code` /
`X-Error-Message` headers and `{"error": ...}` body the real Hub sends, which is what huggingface_hub's
`hf_raise_for_status` reads to pick its exception type (`utils/_http.py`). `HubStartError` is what a
caller of `serve()` / `run()` sees when the server cannot start.
"""

from __future__ import annotations

from hfrelease.errors import EnvironmentProblem


class HubStartError(EnvironmentProblem):
    """The Hub server could not start (port taken, root not writable)."""


class HubHTTPError(Exception):
    """An answer the server gives instead of a result: status, Hub error code, message."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        # Some Hub errors carry more than a message: a 409 on create_repo carries the repo url, a 409 on
        # create_collection the existing slug (huggingface_hub reads `r.json()["slug"]` on exists_ok).
        self.extra = dict(extra or {})


def repo_not_found() -> HubHTTPError:
    """The Hub answers 404 + `RepoNotFound` both for missing repos and private repos the caller may not see."""
    return HubHTTPError(404, "Repository not found", code="RepoNotFound")


def revision_not_found(revision: str) -> HubHTTPError:
    return HubHTTPError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")


def entry_not_found(path: str, *, commit: str | None = None) -> HubHTTPError:
    # `hf_hub_download` caches the non-existence of a file under the commit named by X-Repo-Commit.
    headers = {"X-Repo-Commit": commit} if commit else None
    return HubHTTPError(404, f"Entry not found: {path}", code="EntryNotFound", headers=headers)


def bad_request(message: str) -> HubHTTPError:
    return HubHTTPError(400, message)


def conflict(message: str, **extra: object) -> HubHTTPError:
    return HubHTTPError(409, message, extra=extra)


def unauthorized(message: str = "Invalid username or password.") -> HubHTTPError:
    return HubHTTPError(401, message)


def forbidden(message: str) -> HubHTTPError:
    return HubHTTPError(403, message)
