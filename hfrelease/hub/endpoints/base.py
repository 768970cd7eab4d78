"""What every endpoint shares: the server's state, who may call, the repository and revision a route names,
cursor pagination."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlencode

from hfrelease.hub import errors
from hfrelease.hub.auth import UrlSigner
from hfrelease.hub.collection_store import CollectionStore
from hfrelease.hub.faults import FaultInjector
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.oidc import OidcExchange
from hfrelease.hub.repo_state import Commit, FileEntry, RepoRef, RepoState
from hfrelease.hub.routes import Route
from hfrelease.hub.stats import HubStats
from hfrelease.hub.storage import HubStorage

# huggingface_hub expects 1000 entries per tree page (hf_api._iter_repo_tree_pages).
TREE_PAGE_SIZE = 1000
DISCUSSIONS_PAGE_SIZE = 50


class EndpointBase:
    """The state the endpoints act on, and the helpers they share; `handle` calls the method named after the
    route's endpoint (`routes.ENDPOINTS`), which a resource class of this package defines."""

    def __init__(
        self,
        *,
        storage: HubStorage,
        collections: CollectionStore,
        signer: UrlSigner,
        stats: HubStats,
        faults: FaultInjector,
        tree_page_size: int = TREE_PAGE_SIZE,
        oidc: OidcExchange | None = None,
    ) -> None:
        self.oidc = oidc
        self.storage = storage
        self.collections = collections
        self.signer = signer
        self.stats = stats
        self.faults = faults
        self.tree_page_size = tree_page_size

    def handle(self, route: Route, request: Request) -> Response:
        method: Callable[[Route, Request], Response] = getattr(self, route.endpoint.replace("-", "_"))
        return method(route, request)

    # -- helpers ------------------------------------------------------------------------------------

    def authorize(self, route: Route, user: str | None) -> None:
        """Anonymous reads of public repos are fine; everything else needs one of the server's tokens."""
        if route.access in ("user", "write") and user is None:
            raise errors.unauthorized("You must be authenticated to do this: pass a token (HF_TOKEN or token=...)")
        if route.repo is not None and route.endpoint not in ("repo-create", "lfs-upload"):
            state = self.storage.load(route.repo)
            if state.private and user is None:
                # The Hub hides private repos from anonymous callers behind 401 + RepoNotFound.
                raise errors.HubHTTPError(401, "Repository not found", code="RepoNotFound")

    def _state(self, route: Route) -> tuple[RepoRef, RepoState]:
        if route.repo is None:  # a routing bug: every repo endpoint's route names its repo
            raise errors.HubHTTPError(500, f"Route {route.endpoint} has no repository")
        return route.repo, self.storage.load(route.repo)

    @staticmethod
    def _user(request: Request) -> str:
        if request.user is None:  # `authorize` already refused anonymous callers of this endpoint
            raise errors.unauthorized()
        return request.user

    def _commit_at(self, route: Route, revision: str) -> tuple[RepoRef, RepoState, Commit]:
        ref, state = self._state(route)
        return ref, state, self.storage.read_commit(ref, self.storage.resolve(state, revision))

    def _paginate(self, request: Request, items: Sequence[Any], page_size: int) -> Response:
        """Cursor pagination with a `Link: <...>; rel="next"` header, as huggingface_hub's `paginate` follows."""
        try:
            start = int(request.param("cursor") or 0)
        except ValueError:
            raise errors.bad_request("Invalid cursor") from None
        headers = {}
        if start + page_size < len(items):
            query = {k: v for k, v in request.query.items() if k != "cursor"} | {"cursor": [str(start + page_size)]}
            url = f"{request.base_url}/{'/'.join(request.segments)}?{urlencode(query, doseq=True)}"
            headers["Link"] = f'<{url}>; rel="next"'
        return json_response(list(items[start : start + page_size]), headers=headers)

    def _file_bytes(self, entry: FileEntry) -> bytes:
        return self.storage.objects.path(entry.sha256).read_bytes()
