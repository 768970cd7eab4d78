"""URL routing: which endpoint a request is for, which repository it touches, who may call it.

Routing needs only the method and path, so the server can count the request, check access and consult
fault rules before it reads a (possibly large) body. Endpoint names are shared by stats and fault rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from hfrelease.hub import errors
from hfrelease.hub.repo_state import REPO_TYPES, RepoRef, valid_repo_name

Access = Literal["anyone", "read", "write", "user", "admin"]

ENDPOINTS = (
    "whoami", "repo-create", "repo-delete", "repo-settings", "validate-yaml", "repo-info", "preupload",
    "commit", "tree", "paths-info", "refs", "commits", "tag-create", "tag-delete", "branch-create",
    "branch-delete", "discussion-list", "discussion-create", "discussion-details", "discussion-merge",
    "discussion-status", "discussion-comment", "collection-list", "collection-create", "collection-get",
    "collection-delete", "collection-item-add", "collection-item-delete", "lfs-batch", "lfs-upload",
    "lfs-verify", "resolve", "xet-token", "admin-stats", "admin-faults", "model-page", "oidc-exchange",
    "oidc-id-token",
)  # fmt: skip

_PLURALS = {f"{t}s": t for t in REPO_TYPES}


@dataclass(frozen=True)
class Route:
    endpoint: str
    access: Access
    repo: RepoRef | None = None
    args: tuple[str, ...] = ()  # decoded path parameters (revision, file path, number...)
    streaming: bool = False


def _repo(repo_type: str, namespace: str, name: str) -> RepoRef:
    namespace, name = unquote(namespace), unquote(name)
    # Names become directories under the root: `..` or a slash must never get that far.
    if not (valid_repo_name(namespace) and valid_repo_name(name)):
        raise errors.repo_not_found()
    return RepoRef(repo_type, f"{namespace}/{name}")


def _not_found() -> errors.HubHTTPError:
    return errors.HubHTTPError(404, "Not Found")


def route(method: str, segments: tuple[str, ...]) -> Route:  # noqa: PLR0911 - a routing table
    """Match a request line to a `Route`; 404 for unknown paths, 405 for a known path with a wrong method."""
    if segments[:1] == ("api",):
        return _route_api(method, segments[1:])
    if segments == ("oauth", "token"):
        # Trusted publishing's token exchange (RFC 8693), where huggingface_hub._oidc posts it (`oidc.py`).
        return _only(method, "POST", Route("oidc-exchange", "anyone"))
    if segments[:2] == ("_hfrelease", "lfs") and len(segments) == 6:
        # PUT target of the LFS basic transfer: /_hfrelease/lfs/<type>/<ns>/<name>/<oid>
        repo_type = segments[2]
        if repo_type not in REPO_TYPES:
            raise _not_found()
        return _only(method, "PUT", Route(
            "lfs-upload", "anyone", _repo(repo_type, segments[3], segments[4]), (segments[5],), streaming=True,
        ))  # fmt: skip
    repo_type, rest = "model", segments
    if segments and segments[0] in _PLURALS and segments[0] != "models":
        repo_type, rest = _PLURALS[segments[0]], segments[1:]
    if len(rest) == 6 and rest[1].endswith(".git") and rest[2:5] == ("info", "lfs", "objects"):
        repo = _repo(repo_type, rest[0], rest[1].removesuffix(".git"))
        if rest[5] == "batch":
            return _only(method, "POST", Route("lfs-batch", "write", repo))
        if rest[5] == "verify":
            return _only(method, "POST", Route("lfs-verify", "write", repo))
    if len(rest) >= 5 and rest[2] == "resolve":
        repo = _repo(repo_type, rest[0], rest[1])
        path = unquote("/".join(rest[4:]))
        return _only(method, ("GET", "HEAD"), Route("resolve", "read", repo, (unquote(rest[3]), path)))
    if len(rest) == 2 and repo_type == "model":
        # A model's page: its card at main as the Hub shows it (`hfrelease.preview.hub_page_html`).
        repo = _repo(repo_type, rest[0], rest[1])
        return _only(method, ("GET", "HEAD"), Route("model-page", "read", repo, ("main",)))
    raise _not_found()


def _only(method: str, allowed: str | tuple[str, ...], result: Route) -> Route:
    if method not in ((allowed,) if isinstance(allowed, str) else allowed):
        raise errors.HubHTTPError(405, f"Method {method} not allowed here")
    return result


def _by_method(method: str, table: dict[str, Route]) -> Route:
    if method not in table:
        raise errors.HubHTTPError(405, f"Method {method} not allowed here")
    return table[method]


def _route_api(method: str, seg: tuple[str, ...]) -> Route:  # noqa: PLR0911, PLR0912 - a routing table
    if seg == ("whoami-v2",):
        return _only(method, "GET", Route("whoami", "user"))
    if seg == ("repos", "create"):
        return _only(method, "POST", Route("repo-create", "user"))
    if seg == ("repos", "delete"):
        return _only(method, "DELETE", Route("repo-delete", "user"))
    if seg == ("validate-yaml",):
        return _only(method, "POST", Route("validate-yaml", "anyone"))
    if seg[:1] == ("_hfrelease",):
        if seg == ("_hfrelease", "stats"):
            return _only(method, "GET", Route("admin-stats", "anyone"))
        if seg == ("_hfrelease", "faults"):
            return _only(method, ("GET", "POST", "DELETE"), Route("admin-faults", "admin"))
        if seg == ("_hfrelease", "oidc", "github"):
            return _only(method, "GET", Route("oidc-id-token", "anyone"))
        raise _not_found()
    if seg[:1] == ("collections",):
        return _route_collections(method, seg[1:])
    if len(seg) < 3 or seg[0] not in _PLURALS:
        raise _not_found()
    repo = _repo(_PLURALS[seg[0]], seg[1], seg[2])
    rest = seg[3:]
    arg = tuple(unquote(part) for part in rest[1:2])
    match rest:
        case ():
            return _only(method, "GET", Route("repo-info", "read", repo, ("",)))
        case ("revision", _):
            return _only(method, "GET", Route("repo-info", "read", repo, arg))
        case ("preupload", _):
            return _only(method, "POST", Route("preupload", "write", repo, arg))
        case ("commit", _):
            return _only(method, "POST", Route("commit", "write", repo, arg))
        case ("tree", _, *path):
            return _only(method, "GET", Route("tree", "read", repo, (*arg, unquote("/".join(path)))))
        case ("paths-info", _):
            return _only(method, "POST", Route("paths-info", "read", repo, arg))
        case ("refs",):
            return _only(method, "GET", Route("refs", "read", repo))
        case ("commits", _):
            return _only(method, "GET", Route("commits", "read", repo, arg))
        case ("tag", _):
            table = {"POST": Route("tag-create", "write", repo, arg), "DELETE": Route("tag-delete", "write", repo, arg)}
            return _by_method(method, table)
        case ("branch", _):
            table = {"POST": Route("branch-create", "write", repo, arg),
                     "DELETE": Route("branch-delete", "write", repo, arg)}  # fmt: skip
            return _by_method(method, table)
        case ("xet-write-token" | "xet-read-token", _):
            return _only(method, "GET", Route("xet-token", "anyone", repo))
        case ("settings",):
            return _only(method, "PUT", Route("repo-settings", "write", repo))
        case ("discussions",):
            table = {"GET": Route("discussion-list", "read", repo), "POST": Route("discussion-create", "user", repo)}
            return _by_method(method, table)
        case ("discussions", _):
            return _only(method, "GET", Route("discussion-details", "read", repo, arg))
        case ("discussions", _, action) if action in ("merge", "status", "comment"):
            access: Access = "write" if action != "comment" else "user"
            return _only(method, "POST", Route(f"discussion-{action}", access, repo, arg))
    raise _not_found()


def _route_collections(method: str, seg: tuple[str, ...]) -> Route:
    if not seg:
        table = {"GET": Route("collection-list", "anyone"), "POST": Route("collection-create", "user")}
        return _by_method(method, table)
    if len(seg) < 2:
        raise _not_found()
    slug = f"{unquote(seg[0])}/{unquote(seg[1])}"
    if len(seg) == 2:
        table = {"GET": Route("collection-get", "anyone", args=(slug,)),
                 "DELETE": Route("collection-delete", "user", args=(slug,))}  # fmt: skip
        return _by_method(method, table)
    if seg[2:] == ("items",):
        return _only(method, "POST", Route("collection-item-add", "user", args=(slug,)))
    if len(seg) == 4 and seg[2] == "items":
        return _only(method, "DELETE", Route("collection-item-delete", "user", args=(slug, unquote(seg[3]))))
    raise _not_found()
