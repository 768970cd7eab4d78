"""The account and repositories: who am I, create, delete, settings, info; tags and branches."""

from __future__ import annotations

from hfrelease.hub import errors, payloads
from hfrelease.hub.endpoints.base import EndpointBase
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.repo_state import DEFAULT_BRANCH, REPO_TYPES, RepoRef, valid_repo_name
from hfrelease.hub.routes import Route


class RepoEndpoints(EndpointBase):
    """hf_api.whoami, create_repo, delete_repo, update_repo_settings, repo_info, create_tag, create_branch & co."""

    def whoami(self, route: Route, request: Request) -> Response:
        return json_response(payloads.whoami(self._user(request)))

    def _body_repo(self, request: Request) -> RepoRef:
        body = request.json_object()
        name, namespace = body.get("name"), body.get("organization") or request.user
        repo_type = body.get("type") or "model"
        if not isinstance(name, str) or not isinstance(namespace, str) or not valid_repo_name(name):
            raise errors.bad_request(f"Invalid repository name: {name!r}")
        if repo_type not in REPO_TYPES or not valid_repo_name(namespace):
            raise errors.bad_request(f"Invalid repository type or namespace: {repo_type!r}, {namespace!r}")
        return RepoRef(repo_type, f"{namespace}/{name}")

    def repo_create(self, route: Route, request: Request) -> Response:
        ref = self._body_repo(request)
        body = request.json_object()
        private = body.get("visibility") == "private" or body.get("private") is True
        url = payloads.repo_url(request.base_url, ref)
        try:
            state = self.storage.create_repo(ref, private=private, author=self._user(request))
        except errors.HubHTTPError as error:
            error.extra["url"] = url  # the Hub names the existing repo in its 409
            raise
        first = self.storage.read_commit(ref, state.branches[DEFAULT_BRANCH])
        return json_response(
            {"url": url, "name": ref.repo_id, "id": payloads.repo_info(state, first, blobs=False)["_id"]}
        )

    def repo_delete(self, route: Route, request: Request) -> Response:
        self.storage.delete_repo(self._body_repo(request))
        return json_response({})

    def repo_settings(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        body = request.json_object()
        if "visibility" in body or "private" in body:
            self.storage.set_private(ref, body.get("visibility") == "private" or body.get("private") is True)
        return json_response({})

    def validate_yaml(self, route: Route, request: Request) -> Response:
        # create_commit validates README.md metadata here first; the staging hub accepts any card.
        return json_response({"errors": [], "warnings": []})

    def repo_info(self, route: Route, request: Request) -> Response:
        _, state, commit = self._commit_at(route, route.args[0] or DEFAULT_BRANCH)
        return json_response(payloads.repo_info(state, commit, blobs=request.flag("blobs")))

    # -- tags and branches (create_tag, delete_tag, create_branch, delete_branch) --------------------

    def tag_create(self, route: Route, request: Request) -> Response:
        tag = request.json_object().get("tag")
        if not isinstance(tag, str) or not tag:
            raise errors.bad_request("Missing `tag` in the request body")
        ref, _ = self._state(route)
        self.storage.create_tag(ref, route.args[0], tag)
        return json_response({})

    def tag_delete(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        self.storage.delete_tag(ref, route.args[0])
        return json_response({})

    def branch_create(self, route: Route, request: Request) -> Response:
        starting_point = request.json_object().get("startingPoint")
        ref, _ = self._state(route)
        self.storage.create_branch(ref, route.args[0], str(starting_point) if starting_point else None)
        return json_response({})

    def branch_delete(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        self.storage.delete_branch(ref, route.args[0])
        return json_response({})
