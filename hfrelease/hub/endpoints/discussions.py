"""Discussions and pull requests: list, open, read, merge, close, comment."""

from __future__ import annotations

from hfrelease.hub import errors, payloads
from hfrelease.hub.endpoints.base import DISCUSSIONS_PAGE_SIZE, EndpointBase
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.repo_state import DEFAULT_BRANCH
from hfrelease.hub.routes import Route


class DiscussionEndpoints(EndpointBase):
    """community.py, hf_api.get_repo_discussions & co."""

    def _discussion_num(self, route: Route) -> int:
        try:
            return int(route.args[0])
        except ValueError:
            raise errors.bad_request(f"Invalid discussion number: {route.args[0]!r}") from None

    def discussion_list(self, route: Route, request: Request) -> Response:
        ref, state = self._state(route)
        kind, status, author = request.param("type"), request.param("status"), request.param("author")
        selected = [
            d for d in reversed(state.discussions)
            if (kind in (None, "all") or d.is_pull_request == (kind == "pull_request"))
            and (status in (None, "all") or d.status == status)
            and (author is None or d.author == author)
        ]  # fmt: skip
        try:
            page = int(request.param("p") or 0)
        except ValueError:
            raise errors.bad_request("Invalid page number") from None
        start = page * DISCUSSIONS_PAGE_SIZE
        shown = selected[start : start + DISCUSSIONS_PAGE_SIZE]
        return json_response({
            "discussions": [payloads.discussion_summary(ref, d) for d in shown],
            "count": len(selected),
            "start": start,
            "numClosedDiscussions": sum(1 for d in state.discussions if d.status == "closed"),
        })  # fmt: skip

    def discussion_create(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        body = request.json_object()
        title = str(body.get("title") or "").strip()
        if not title:
            raise errors.bad_request("A discussion needs a title")
        discussion = self.storage.create_discussion(
            ref, title=title, description=str(body.get("description") or ""),
            pull_request=bool(body.get("pullRequest")), author=self._user(request),
        )  # fmt: skip
        return json_response({"num": discussion.num, "pullRequest": discussion.is_pull_request})

    def discussion_details(self, route: Route, request: Request) -> Response:
        ref, state = self._state(route)
        discussion = state.discussion(self._discussion_num(route))
        diff = None
        if discussion.is_pull_request and request.flag("diff"):
            before = self.storage.read_commit(ref, discussion.fork_point or state.branches[DEFAULT_BRANCH])
            after = self.storage.read_commit(ref, state.pull_requests[discussion.num])
            diff = payloads.file_diff(before.files, after.files)
        return json_response(payloads.discussion_details(state, discussion, diff=diff))

    def discussion_merge(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        comment = request.json().get("comment") if request.body else None
        event = self.storage.merge(ref, self._discussion_num(route), comment=comment, author=self._user(request))
        return json_response({"newStatus": event})

    def discussion_status(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        body = request.json_object()
        status = body.get("status")
        if status not in ("open", "closed"):
            raise errors.bad_request("Invalid status, valid statuses are: 'open' and 'closed'")
        event = self.storage.change_status(
            ref, self._discussion_num(route), status=status, comment=body.get("comment"), author=self._user(request)
        )
        return json_response({"newStatus": event})

    def discussion_comment(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        text = str(request.json_object().get("comment") or "").strip()
        if not text:
            raise errors.bad_request("A comment cannot be empty")
        event = self.storage.comment(ref, self._discussion_num(route), text=text, author=self._user(request))
        return json_response({"newMessage": event})
