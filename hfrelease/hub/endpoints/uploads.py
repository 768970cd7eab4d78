"""Uploads: the upload modes of files, the LFS batch, upload and verify, and the commit itself."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from hfrelease.hub import errors, gitattributes, payloads
from hfrelease.hub.endpoints.base import EndpointBase
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.repo_state import AddFile, DeleteFile, DeleteFolder, Operation, lfs_entry, regular_entry
from hfrelease.hub.routes import Route

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _check_path(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] == ".git":
        raise errors.bad_request(f"Invalid path in repository: {path!r}")
    return path



class UploadEndpoints(EndpointBase):
    """_commit_api._fetch_upload_modes, lfs.post_lfs_batch_info / lfs_upload, _send_commit."""

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
