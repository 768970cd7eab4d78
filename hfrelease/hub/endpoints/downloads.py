"""Downloads: a file at a revision (with byte ranges), a model's page, and Xet refused."""

from __future__ import annotations

import logging
import re
from urllib.parse import quote

from hfrelease.hub import errors
from hfrelease.hub.endpoints.base import EndpointBase
from hfrelease.hub.messages import FileBody, Request, Response
from hfrelease.hub.routes import Route

logger = logging.getLogger("hfrelease.hub")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class DownloadEndpoints(EndpointBase):
    """file_download.get_hf_file_metadata, http_get."""

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
        from hfrelease.preview import PAGE_CSP, hub_files_page_html, hub_page_html

        ref, _, commit = self._commit_at(route, route.args[0])
        entry = commit.files.get("README.md")
        if entry is None:
            # Still a page, as the Hub shows one: no card, and the files there are.
            files = {path: file.size for path, file in commit.files.items()}
            body = hub_files_page_html(ref.repo_id, files, revision=commit.id).encode()
        else:
            readme = self.storage.objects.path(entry.sha256).read_text(encoding="utf-8", errors="replace")
            body = hub_page_html(readme, repo=ref.repo_id, revision=commit.id).encode()
        headers = {"Content-Type": "text/html; charset=utf-8", "X-Repo-Commit": commit.id,
                   "Content-Security-Policy": PAGE_CSP}
        return Response(headers=headers, body=body)

    def xet_token(self, route: Route, request: Request) -> Response:
        # hf_xet shows only the status of this answer (hfrelease's own errors say what a 501 here means); the
        # body and the server's log say what to do.
        logger.warning("A client tried to use Xet storage, which this server cannot emulate: set "
                       "HF_HUB_DISABLE_XET=1 in the client's environment")
        raise errors.HubHTTPError(
            501, "Xet storage is not supported by this Hub server: set HF_HUB_DISABLE_XET=1 in the client environment"
        )


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


