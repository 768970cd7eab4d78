"""Reading a revision: its tree, paths' info, the repository's refs and its commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

from hfrelease.hub import errors, payloads
from hfrelease.hub.endpoints.base import DISCUSSIONS_PAGE_SIZE, EndpointBase
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.repo_state import Commit, RepoRef
from hfrelease.hub.routes import Route

# huggingface_hub expects 50 entries per tree page when `expand=True` (hf_api._iter_repo_tree_pages).
EXPANDED_PAGE_SIZE = 50


class RevisionEndpoints(EndpointBase):
    """list_repo_tree, get_paths_info, list_repo_refs, list_repo_commits."""

    def _last_commits(self, ref: RepoRef, head: Commit, paths: Sequence[str]) -> dict[str, Commit]:
        """For each path (file or folder), the newest first-parent commit that changed it."""
        wanted, found = set(paths), {}
        for commit in self.storage.history(ref, head.id):
            if not wanted:
                break
            parent = self.storage.read_commit(ref, commit.parents[0]) if commit.parents else None
            for changed in payloads.changed_paths(commit, parent):
                for path in [p for p in wanted if changed == p or changed.startswith(p + "/")]:
                    found[path] = commit
                    wanted.discard(path)
        return found

    def _entries(self, ref: RepoRef, commit: Commit, paths: Sequence[str], *, expand: bool) -> list[dict[str, Any]]:
        files = commit.files
        last = self._last_commits(ref, commit, paths) if expand else {}
        return [
            payloads.file_entry(p, files[p], last.get(p)) if p in files
            else payloads.folder_entry(p, files, last.get(p))
            for p in paths
        ]  # fmt: skip

    def tree(self, route: Route, request: Request) -> Response:
        ref, _, commit = self._commit_at(route, route.args[0])
        root = route.args[1].strip("/")
        recursive, expand = request.flag("recursive"), request.flag("expand")
        prefix = f"{root}/" if root else ""
        below = [p for p in commit.files if p.startswith(prefix)]
        if root and not below:
            raise errors.entry_not_found(root, commit=commit.id)
        paths: set[str] = set()
        for path in below:
            parts = path[len(prefix) :].split("/")
            depth = len(parts) if recursive else 1
            paths.update(prefix + "/".join(parts[: i + 1]) for i in range(min(depth, len(parts))))
        entries = self._entries(ref, commit, sorted(paths), expand=expand)
        return self._paginate(request, entries, EXPANDED_PAGE_SIZE if expand else self.tree_page_size)

    def paths_info(self, route: Route, request: Request) -> Response:
        ref, _, commit = self._commit_at(route, route.args[0])
        if "json" in (request.headers.get("Content-Type") or ""):
            body = request.json_object()
            wanted, expand = body.get("paths", []), bool(body.get("expand"))
        else:  # huggingface_hub sends a form: paths=a&paths=b&expand=false
            form = parse_qs(request.body.decode(errors="replace"))
            wanted, expand = form.get("paths", []), form.get("expand", ["false"])[0].lower() == "true"
        if isinstance(wanted, str):
            wanted = [wanted]
        files = commit.files
        found = [
            p.strip("/") for p in wanted
            if isinstance(p, str) and (p.strip("/") in files or any(f.startswith(p.strip("/") + "/") for f in files))
        ]  # fmt: skip
        return json_response(self._entries(ref, commit, found, expand=expand))

    def refs(self, route: Route, request: Request) -> Response:
        _, state = self._state(route)
        return json_response(payloads.refs(state, include_prs=request.flag("include_prs")))

    def commits(self, route: Route, request: Request) -> Response:
        ref, _, head = self._commit_at(route, route.args[0])
        history = [payloads.git_commit(c) for c in self.storage.history(ref, head.id)]
        return self._paginate(request, history, DISCUSSIONS_PAGE_SIZE)
