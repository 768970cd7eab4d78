"""What each endpoint does: request in, response out, state in `HubStorage` / `CollectionStore`.

Request and response shapes follow what huggingface_hub 2.x sends and parses; the module of the client
that calls an endpoint is named next to it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from hfrelease.hub import errors, gitattributes, payloads
from hfrelease.hub.auth import UrlSigner
from hfrelease.hub.collection_store import ITEM_TYPES, LISTED_ITEMS, CollectionStore
from hfrelease.hub.faults import FaultInjector, FaultRule
from hfrelease.hub.messages import FileBody, Request, Response, json_response
from hfrelease.hub.oidc import OidcExchange
from hfrelease.hub.routes import Route
from hfrelease.hub.stats import HubStats
from hfrelease.hub.storage import (
    DEFAULT_BRANCH,
    REPO_TYPES,
    AddFile,
    Commit,
    DeleteFile,
    DeleteFolder,
    FileEntry,
    HubStorage,
    Operation,
    RepoRef,
    RepoState,
    lfs_entry,
    regular_entry,
    valid_repo_name,
)

logger = logging.getLogger("hfrelease.hub")

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
# huggingface_hub expects 1000 entries per tree page, 50 when `expand=True` (hf_api._iter_repo_tree_pages).
TREE_PAGE_SIZE = 1000
EXPANDED_PAGE_SIZE = 50
DISCUSSIONS_PAGE_SIZE = 50


def _check_path(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] == ".git":
        raise errors.bad_request(f"Invalid path in repository: {path!r}")
    return path


class Endpoints:
    """One method per endpoint name of `routes.ENDPOINTS`."""

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

    # -- account and repositories (hf_api.whoami, create_repo, delete_repo, repo_info) ----------------

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

    # -- uploads (_commit_api._fetch_upload_modes, lfs.post_lfs_batch_info / lfs_upload, _send_commit) ---

    def preupload(self, route: Route, request: Request) -> Response:
        _, _, commit = self._commit_at(route, route.args[0])
        body = request.json_object()
        files = commit.files
        attributes = files.get(".gitattributes")
        lfs = gitattributes.lfs_patterns(
            self._file_bytes(attributes).decode(errors="replace") if attributes else gitattributes.DEFAULT_GITATTRIBUTES
        )
        ignore_source = body.get("gitIgnore")
        if not isinstance(ignore_source, str):
            gitignore = files.get(".gitignore")
            ignore_source = self._file_bytes(gitignore).decode(errors="replace") if gitignore else ""
        ignored = gitattributes.ignore_patterns(ignore_source)
        answers = []
        for item in body.get("files", []):
            try:
                path, size = _check_path(item["path"]), int(item["size"])
                sample = base64.b64decode(item.get("sample", ""))
            except (KeyError, TypeError, ValueError, binascii.Error):
                raise errors.bad_request("Malformed preupload file entry") from None
            mode = gitattributes.upload_mode(path, size, sample, lfs)
            answer: dict[str, Any] = {"path": path, "uploadMode": mode,
                                      "shouldIgnore": gitattributes.matches_any(path, ignored)}  # fmt: skip
            existing = files.get(path)
            if existing is not None:
                # The client skips a file whose oid matches its own: sha256 for LFS, git blob sha1 otherwise.
                regular_oid = existing.git_oid if not existing.lfs else self.storage.objects.git_oid(existing.sha256)
                answer["oid"] = existing.sha256 if mode == "lfs" else regular_oid
            answers.append(answer)
        return json_response({"files": answers, "commitOid": commit.id})

    def lfs_batch(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        body = request.json_object()
        if body.get("operation") != "upload":
            raise errors.bad_request("Only the `upload` operation of the LFS batch API is supported")
        answers = []
        for item in body.get("objects", []):
            oid, size = item.get("oid"), item.get("size")
            if not isinstance(oid, str) or not _SHA256.match(oid) or not isinstance(size, int) or size < 0:
                raise errors.bad_request("Malformed LFS object: need a sha256 `oid` and an integer `size`")
            answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            objects = self.storage.objects
            if not (objects.exists(oid) and objects.size(oid) == size):
                # No `actions` means "already stored": huggingface_hub then sends no bytes for this file.
                signature = self.signer.sign(ref.repo_type, ref.repo_id, oid, str(size))
                upload = (
                    f"{request.base_url}/_hfrelease/lfs/{ref.repo_type}/{ref.repo_id}/{oid}"
                    f"?{urlencode({'size': size, 'sig': signature})}"
                )
                verify = f"{request.base_url}/{ref.url_path}.git/info/lfs/objects/verify"
                answer["actions"] = {"upload": {"href": upload}, "verify": {"href": verify}}
            answers.append(answer)
        return json_response(
            {"transfer": "basic", "objects": answers}, headers={"Content-Type": "application/vnd.git-lfs+json"}
        )

    def lfs_upload(self, route: Route, request: Request) -> Response:
        ref = route.repo
        if ref is None or request.body_chunks is None:  # routing guarantees both for this endpoint
            raise errors.HubHTTPError(500, "LFS upload route without repository or body")
        oid, size, signature = route.args[0], request.param("size") or "", request.param("sig") or ""
        if not self.signer.verify(signature, ref.repo_type, ref.repo_id, oid, size):
            raise errors.forbidden("Invalid or expired upload URL")
        counted = _Counting(request.body_chunks, self.stats.add_lfs_bytes)
        sha256, received = self.storage.objects.put_chunks(counted)
        if sha256 != oid or str(received) != size:
            raise errors.bad_request(f"Uploaded content does not match oid {oid} and size {size}")
        return Response(headers={"ETag": f'"{oid}"'})

    def lfs_verify(self, route: Route, request: Request) -> Response:
        body = request.json_object()
        oid, size = str(body.get("oid", "")), body.get("size")
        objects = self.storage.objects
        if not (_SHA256.match(oid) and objects.exists(oid) and objects.size(oid) == size):
            raise errors.HubHTTPError(404, f"LFS object {oid} of size {size} was not uploaded")
        return json_response({"oid": oid, "size": size})

    def commit(self, route: Route, request: Request) -> Response:
        ref, _ = self._state(route)
        header: dict[str, Any] | None = None
        operations: list[Operation] = []
        for line in request.body.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                key, value = item["key"], item["value"]
            except (ValueError, KeyError, TypeError):
                raise errors.bad_request("Malformed commit payload: expected NDJSON lines of {key, value}") from None
            if key == "header":
                header = value
            else:
                operations.append(self._operation(key, value))
        if not header or not str(header.get("summary") or "").strip():
            raise errors.bad_request("A commit needs a header with a non-empty `summary`")
        parent = header.get("parentCommit")
        create_pr = request.flag("create_pr")
        outcome = self.storage.commit(
            ref, route.args[0], operations, title=str(header["summary"]).strip(),
            message=str(header.get("description") or ""), author=self._user(request),
            parent_commit=str(parent) if parent else None, create_pr=create_pr,
        )  # fmt: skip
        url = payloads.repo_url(request.base_url, ref)
        return json_response({
            "success": True,
            "commitOid": outcome.commit.id,
            "commitUrl": f"{url}/commit/{outcome.commit.id}",
            "hookOutput": "",
            "pullRequestUrl": f"{url}/discussions/{outcome.pr_num}" if create_pr else None,
        })  # fmt: skip

    def _operation(self, key: str, value: Any) -> Operation:
        if not isinstance(value, dict) or not isinstance(value.get("path"), str):
            raise errors.bad_request(f"Malformed `{key}` operation")
        path = value["path"]
        if key == "file":
            content_text = value.get("content", "")
            try:
                if value.get("encoding") == "base64":
                    content = base64.b64decode(content_text, validate=True)
                else:
                    content = str(content_text).encode()
            except (binascii.Error, ValueError):
                raise errors.bad_request(f"Invalid base64 content for {path}") from None
            self.stats.add_regular_bytes(len(content))
            if len(content) >= gitattributes.LFS_THRESHOLD:
                raise errors.bad_request(
                    f"{path} is larger than 10 MiB: upload it through LFS (ask /preupload for the upload mode)"
                )
            return AddFile(_check_path(path), regular_entry(content, self.storage.objects.put_bytes(content)))
        if key == "lfsFile":
            oid = str(value.get("oid", ""))
            objects = self.storage.objects
            if not _SHA256.match(oid) or not objects.exists(oid):
                raise errors.bad_request(
                    f"Your push was rejected because an LFS pointer pointed to a file that does not exist: {path}"
                )
            stored = objects.size(oid)
            if "size" in value and value["size"] != stored:
                raise errors.bad_request(f"LFS object {oid} has size {stored}, not {value['size']}")
            return AddFile(_check_path(path), lfs_entry(oid, stored))
        if key == "deletedFile":
            return DeleteFile(_check_path(path))
        if key == "deletedFolder":
            return DeleteFolder(_check_path(path.rstrip("/")))
        raise errors.bad_request(f"Unsupported commit operation `{key}`")

    # -- reading a revision (list_repo_tree, get_paths_info, list_repo_refs, list_repo_commits) --------

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

    # -- discussions and pull requests (community.py, hf_api.get_repo_discussions & co) ---------------

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

    # -- collections (hf_api.create_collection, get_collection, add_collection_item, ...) -------------

    def _collection(self, slug: str, user: str | None) -> dict[str, Any]:
        collection = self.collections.get(slug)
        if collection["private"] and user is None:
            raise errors.HubHTTPError(404, "Collection not found")
        return collection

    def collection_list(self, route: Route, request: Request) -> Response:
        """The listing's shape is the Hub's, not `get_collection`'s: no `position` and at most 4 items each.

        huggingface_hub's `list_collections` numbers the collections itself (`Collection(position=n, **data)`),
        so a `position` in the answer is a TypeError on the client.
        """
        owners = set(request.query.get("owner") or ())
        # `item` is "<type>s/<id>" (models/alice/x, datasets/..., papers/2311.12983), as the Hub takes it.
        wanted = {tuple(i.split("/", 1)) for i in request.query.get("item") or () if "/" in i}
        listed = []
        for collection in self.collections.list(owner=None):
            if collection["private"] and not request.user:
                continue
            if owners and collection["owner"]["name"] not in owners:
                continue
            items = collection["items"]
            if wanted and not any((f"{i['type']}s", i["id"]) in wanted for i in items):
                continue
            listed.append({k: v for k, v in collection.items() if k != "position"} | {"items": items[:LISTED_ITEMS]})
        if request.param("sort") == "lastModified":
            listed.sort(key=lambda c: str(c["lastUpdated"]), reverse=True)
        elif request.param("sort") == "upvotes":
            listed.sort(key=lambda c: int(c["upvotes"]), reverse=True)
        return self._paginate(request, listed, int(request.param("limit") or 100))

    def collection_create(self, route: Route, request: Request) -> Response:
        body = request.json_object()
        title = str(body.get("title") or "").strip()
        namespace = body.get("namespace") or request.user
        if not title or not isinstance(namespace, str):
            raise errors.bad_request("A collection needs a title and a namespace")
        description = body.get("description")
        collection = self.collections.create(
            namespace=namespace, title=title, private=bool(body.get("private")),
            description=str(description) if description is not None else None,
        )  # fmt: skip
        return json_response(collection)

    def collection_get(self, route: Route, request: Request) -> Response:
        return json_response(self._collection(route.args[0], request.user))

    def collection_delete(self, route: Route, request: Request) -> Response:
        self.collections.delete(route.args[0])
        return json_response({})

    def collection_item_add(self, route: Route, request: Request) -> Response:
        body = request.json_object()
        item = body.get("item") or {}
        item_id, item_type = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or item_type not in ITEM_TYPES:
            raise errors.bad_request(f"An item needs an `id` and a `type` among {list(ITEM_TYPES)}")
        if item_type in REPO_TYPES and not self.storage.exists(RepoRef(item_type, item_id)):
            raise errors.HubHTTPError(404, f"{item_type} {item_id} does not exist")
        note = body.get("note")
        collection = self.collections.add_item(
            route.args[0], item_id=item_id, item_type=item_type, note=str(note) if note is not None else None
        )
        return json_response(collection)

    def collection_item_delete(self, route: Route, request: Request) -> Response:
        self.collections.delete_item(route.args[0], route.args[1])
        return json_response({})

    # -- downloads (file_download.get_hf_file_metadata, http_get) -------------------------------------

    def resolve(self, route: Route, request: Request) -> Response:
        _, _, commit = self._commit_at(route, route.args[0])
        path = route.args[1]
        entry = commit.files.get(path)
        if entry is None:
            raise errors.entry_not_found(path, commit=commit.id)
        name = path.rsplit("/", 1)[-1]
        headers = {
            "X-Repo-Commit": commit.id,
            "ETag": f'"{entry.etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
        }
        if entry.lfs:
            # Clients prefer these over ETag/Content-Length (they survive the CDN redirect the Hub uses).
            headers |= {"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(entry.size)}
        start, length, status = 0, entry.size, 200
        range_header = request.headers.get("Range")
        if range_header:
            start, length = _byte_range(range_header, entry.size)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{entry.size}"
        body = FileBody(self.storage.objects.path(entry.sha256), start, length)
        return Response(status=status, headers=headers, file=body)

    def model_page(self, route: Route, request: Request) -> Response:
        from hfrelease.preview import hub_page_html

        ref, _, commit = self._commit_at(route, route.args[0])
        entry = commit.files.get("README.md")
        if entry is None:
            raise errors.entry_not_found("README.md", commit=commit.id)
        readme = self.storage.objects.path(entry.sha256).read_text(encoding="utf-8", errors="replace")
        body = hub_page_html(readme, repo=ref.repo_id, revision=commit.id).encode()
        return Response(headers={"Content-Type": "text/html; charset=utf-8", "X-Repo-Commit": commit.id}, body=body)

    def xet_token(self, route: Route, request: Request) -> Response:
        # hf_xet only shows the status of this answer; the message is for whoever reads the server log.
        logger.warning("A client tried to use Xet storage, which this server cannot emulate")
        raise errors.HubHTTPError(
            501, "Xet storage is not supported by this Hub server: set HF_HUB_DISABLE_XET=1 in the client environment"
        )

    # -- trusted publishing (`oidc.py`) ---------------------------------------------------------------

    def _exchange(self) -> OidcExchange:
        if self.oidc is None:
            raise errors.HubHTTPError(404, "Trusted publishing is not set up on this Hub")
        return self.oidc

    def oidc_exchange(self, route: Route, request: Request) -> Response:
        return json_response(self._exchange().exchange(request.json_object(), audience=request.base_url))

    def oidc_id_token(self, route: Route, request: Request) -> Response:
        audience = (request.query.get("audience") or [request.base_url])[0]
        return json_response(self._exchange().id_token(audience=audience,
                                                       authorization=request.headers.get("Authorization")))

    # -- test-only administration ---------------------------------------------------------------------

    def admin_stats(self, route: Route, request: Request) -> Response:
        return json_response(self.stats.snapshot())

    def admin_faults(self, route: Route, request: Request) -> Response:
        if request.method == "DELETE":
            self.faults.clear()
        elif request.method == "POST":
            data = request.json()
            try:
                rules = [FaultRule.from_json(r) for r in (data if isinstance(data, list) else [data])]
            except (TypeError, ValueError) as error:
                raise errors.bad_request(f"Invalid fault rule: {error}") from None
            for rule in rules:
                self.faults.add(rule)
        return json_response(self.faults.describe())


def _byte_range(header: str, size: int) -> tuple[int, int]:
    """(start, length) of a single `bytes=a-b` range; 416 when it cannot be satisfied."""
    match = _RANGE.match(header.strip())
    unsatisfiable = errors.HubHTTPError(416, "Requested range not satisfiable",
                                        headers={"Content-Range": f"bytes */{size}"})  # fmt: skip
    if match is None or match.groups() == ("", ""):
        raise unsatisfiable
    first, last = match.groups()
    if first == "":  # the last N bytes
        length = min(int(last), size)
        return size - length, length
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        raise unsatisfiable
    return start, end - start + 1


class _Counting:
    """Passes chunks through while reporting their size (stats count LFS bytes as they arrive)."""

    def __init__(self, chunks: Any, report: Callable[[int], None]) -> None:
        self._chunks = iter(chunks)
        self._report = report

    def __iter__(self) -> _Counting:
        return self

    def __next__(self) -> bytes:
        chunk: bytes = next(self._chunks)
        self._report(len(chunk))
        return chunk
