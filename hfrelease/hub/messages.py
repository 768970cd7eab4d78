"""Requests and responses as plain values, so endpoint code never touches sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from hfrelease.hub import errors


@dataclass(frozen=True, kw_only=True)
class Request:
    method: str
    segments: tuple[str, ...]  # path segments, still percent-encoded: `refs%2Fpr%2F1` is one segment
    query: Mapping[str, list[str]]
    headers: Message
    base_url: str  # `http://host:port` as the client addressed us, for URLs we hand back
    request_id: str
    user: str | None = None
    body: bytes = b""
    # Only the LFS upload endpoint streams its body (it can be gigabytes); everyone else gets `body`.
    body_chunks: Iterator[bytes] | None = None

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        return (self.param(name) or "").lower() in ("1", "true", "yes")

    def json(self) -> Any:
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise errors.bad_request(f"Request body is not valid JSON: {error}") from None

    def json_object(self) -> dict[str, Any]:
        data = self.json()
        if not isinstance(data, dict):
            raise errors.bad_request("Request body must be a JSON object")
        return data

    def segment(self, index: int) -> str:
        return unquote(self.segments[index])

    def rest(self, start: int) -> str:
        """The path from segment `start` on, decoded (a file path may arrive with or without `%2F`)."""
        return unquote("/".join(self.segments[start:]))


@dataclass(frozen=True)
class FileBody:
    path: Path
    offset: int
    length: int


@dataclass(kw_only=True)
class Response:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    file: FileBody | None = None

    @property
    def content_length(self) -> int:
        return self.file.length if self.file is not None else len(self.body)


def json_response(data: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        status=status,
        headers={"Content-Type": "application/json; charset=utf-8", **(headers or {})},
        body=json.dumps(data).encode(),
    )


def error_response(error: errors.HubHTTPError) -> Response:
    """The shape huggingface_hub's `hf_raise_for_status` parses: error code + message headers, JSON body."""
    headers = {"X-Error-Message": error.message, **error.headers}
    if error.code:
        headers["X-Error-Code"] = error.code
    return json_response({"error": error.message, **error.extra}, status=error.status, headers=headers)
