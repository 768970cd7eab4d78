"""The HTTP layer: a `ThreadingHTTPServer` that turns sockets into `Request`s and `Response`s into bytes.

Everything Hub-specific lives in `routes.py` (which endpoint), `endpoints.py` (what it does) and
`storage.py` (what is kept). This module adds what every request shares: HTTP/1.1 keep-alive (httpx
pools connections), chunked request bodies, `X-Request-Id` on every answer, request counting, fault
injection, and an access log that never contains a header (so never a token).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hfrelease.hub import errors, routes
from hfrelease.hub.auth import DEFAULT_USER, Credentials, ReadScope, UrlSigner, read_scope_of, read_scopes
from hfrelease.hub.collection_store import CollectionStore
from hfrelease.hub.endpoints import Endpoints
from hfrelease.hub.endpoints.base import TREE_PAGE_SIZE
from hfrelease.hub.faults import FaultInjector, FaultRule
from hfrelease.hub.messages import Request, Response, error_response
from hfrelease.hub.oidc import OidcExchange, OidcSettings, check_scope
from hfrelease.hub.stats import HubStats
from hfrelease.hub.storage import HubStorage

logger = logging.getLogger("hfrelease.hub")

_CHUNK = 1024 * 1024
# Only commits carry sizeable non-streamed bodies, and their inline files are capped at 10 MiB each.
MAX_BODY = 512 * 1024 * 1024


@dataclass(kw_only=True)
class _App:
    endpoints: Endpoints
    credentials: Credentials
    stats: HubStats
    faults: FaultInjector
    fault_injection: bool
    oidc: OidcExchange | None = None
    read_scopes: Mapping[str, ReadScope] = field(default_factory=dict)

    def authenticate(self, authorization: str | None) -> tuple[str | None, str | ReadScope | None]:
        """The user behind the header, and what its token is scoped to: a repo (a trusted-publishing token),
        the private repos a read-only token may read, or nothing (a write token, or anonymous)."""
        if (read := read_scope_of(self.read_scopes, authorization)) is not None:
            return self.credentials.user, read
        if self.oidc is not None and authorization:
            scheme, _, token = authorization.partition(" ")
            scope = self.oidc.scope(token.strip()) if scheme.lower() == "bearer" else None
            if scope is not None:
                return self.credentials.user, scope
        return self.credentials.authenticate(authorization), None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # an idle keep-alive connection must not keep the process alive
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: _App) -> None:
        self.app = app
        super().__init__(address, _Handler)


def _header_value(value: str) -> str:
    """Header values go out as latin-1 on one line: replace what would break the response framing."""
    return value.replace("\r", " ").replace("\n", " ").encode("latin-1", "replace").decode("latin-1")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hfrelease-hub"
    timeout = 300  # seconds an idle keep-alive connection may linger
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; with Nagle's algorithm on, the second waits for the
        # client's delayed ACK (~40 ms per request on Linux). Every request would pay it.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Silenced: `_handle` writes its own access line (method, path, status; never headers)."""

    def log_message(self, format: str, *args: Any) -> None:
        # Only reached for malformed request lines (via send_error); the request line holds no token.
        logger.debug("%s - " + format, self.address_string(), *args)

    # -- bodies -------------------------------------------------------------------------------------

    def _body_chunks(self) -> Iterator[bytes]:
        """The request body as it arrives, whether framed by Content-Length or chunked encoding."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while True:
                size_line = self.rfile.readline(65537)
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise errors.bad_request("Malformed chunked request body") from None
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers: none that matter here
                    break
                yield from self._exactly(size)
                self.rfile.readline(3)  # the CRLF closing each chunk
        else:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                raise errors.bad_request("Invalid Content-Length") from None
            yield from self._exactly(length)
        self._body_done = True

    def _exactly(self, count: int) -> Iterator[bytes]:
        while count > 0:
            chunk = self.rfile.read(min(_CHUNK, count))
            if not chunk:
                raise ConnectionError("client closed the connection mid-body")
            count -= len(chunk)
            yield chunk

    def _read_body(self) -> bytes:
        parts, size = [], 0
        for chunk in self._body_chunks():
            size += len(chunk)
            if size > MAX_BODY:
                raise errors.HubHTTPError(413, "Payload Too Large")
            parts.append(chunk)
        return b"".join(parts)

    # -- one request --------------------------------------------------------------------------------

    def _handle(self) -> None:
        app = self.server.app
        started = time.monotonic()
        self._body_done = False
        self._request_id = self.headers.get("X-Amzn-Trace-Id") or uuid.uuid4().hex
        method = self.command
        split = urlsplit(self.path)
        segments = tuple(part for part in split.path.split("/") if part)
        endpoint = "unknown"
        try:
            route = routes.route(method, segments)
            endpoint = route.endpoint
            if route.access == "admin" and not app.fault_injection:
                raise errors.HubHTTPError(404, "Not Found")
            if not endpoint.startswith("admin-"):
                app.stats.count_request(endpoint)
            # Read the body before anything can fail, so an error answer leaves the connection reusable.
            body = b"" if route.streaming else self._read_body()
            # The id-token endpoint's Authorization header is the CI's request token, not a Hub token.
            user, scope = (None, None) if endpoint == "oidc-id-token" else app.authenticate(
                self.headers.get("Authorization"))
            repo = route.repo.repo_id if route.repo else None
            if isinstance(scope, ReadScope):
                user = scope.user_for(user=self.server.app.credentials.user, repo=repo, access=route.access)
            elif scope is not None:
                check_scope(scope, repo=repo, access=route.access)
            # Repo routes carry the revision first among their path arguments (when they name one).
            revision = route.args[0] if route.repo and route.args else None
            if (rule := app.faults.take(endpoint=endpoint, method=method, repo=repo, revision=revision,
                                        after=False)) is not None:  # fmt: skip
                for _ in self._body_chunks() if not self._body_done else ():
                    pass  # drain, so the client reads our answer instead of a reset connection
                self._fault(rule, started, split.path)
                return
            app.endpoints.authorize(route, user)
            request = Request(
                method=method, segments=segments, query=parse_qs(split.query, keep_blank_values=True),
                headers=self.headers, base_url=f"http://{self.headers.get('Host') or self._own_host()}",
                request_id=self._request_id, user=user, body=body,
                body_chunks=self._body_chunks() if route.streaming else None,
            )  # fmt: skip
            response = app.endpoints.handle(route, request)
            if (rule := app.faults.take(endpoint=endpoint, method=method, repo=repo, revision=revision,
                                        after=True)) is not None:  # fmt: skip
                self._fault(rule, started, split.path)
                return
        except errors.HubHTTPError as error:
            response = error_response(error)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
            logger.info("%s %s -> client went away [%s]", method, split.path, self._request_id)
            return
        except Exception:
            logger.exception("%s %s failed [%s]", method, split.path, self._request_id)
            response = error_response(errors.HubHTTPError(500, "Internal Error"))
        self._send(response, head=method == "HEAD")
        logger.info(
            "%s %s -> %d %s [%s] %.0fms", method, split.path, response.status, endpoint, self._request_id,
            1000 * (time.monotonic() - started),
        )  # fmt: skip

    def _own_host(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

    def _fault(self, rule: FaultRule, started: float, path: str) -> None:
        if rule.stall:
            time.sleep(rule.stall)
        if rule.drop_connection:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            logger.info("%s %s -> connection dropped (injected fault) [%s]", self.command, path, self._request_id)
            return
        status = rule.status or 500  # FaultRule guarantees a status when it does not drop
        headers = {"Retry-After": str(rule.retry_after)} if rule.retry_after is not None else {}
        error = errors.HubHTTPError(status, f"Injected fault: HTTP {status}", headers=headers)
        self._send(error_response(error), head=self.command == "HEAD")
        logger.info(
            "%s %s -> %d (injected fault) [%s] %.0fms", self.command, path, status, self._request_id,
            1000 * (time.monotonic() - started),
        )  # fmt: skip

    def _send(self, response: Response, *, head: bool) -> None:
        if not self._body_done:
            # The body was not (fully) read: the rest of it would be taken for the next request.
            self.close_connection = True
            response.headers["Connection"] = "close"
        self.send_response(response.status)
        headers = {"X-Request-Id": self._request_id, "Content-Length": str(response.content_length)}
        for name, value in (headers | response.headers).items():
            self.send_header(name, _header_value(value))
        self.end_headers()
        if head:
            return
        if response.file is None:
            self.wfile.write(response.body)
            return
        with response.file.path.open("rb") as handle:
            handle.seek(response.file.offset)
            remaining = response.file.length
            while remaining > 0:
                chunk = handle.read(min(_CHUNK, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """Everything `hfrelease hub serve` needs; the CLI parses its options into one of these."""

    root: Path
    host: str = "127.0.0.1"
    port: int = 0
    tokens: tuple[str, ...] = ()
    user: str = DEFAULT_USER
    fault_injection: bool = False  # test-only: enables fault rules over HTTP (see `faults.py`)
    tree_page_size: int = TREE_PAGE_SIZE


@dataclass
class HubServer:
    """A running server: its `url`, where its token lives, its counters and fault rules."""

    url: str
    root: Path
    token_file: Path | None
    faults: FaultInjector
    _httpd: _HTTPServer = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _stats: HubStats = field(repr=False)

    def stats(self) -> dict[str, Any]:
        """Requests per endpoint and file bytes received since start (or the last `reset_stats`)."""
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats.reset()

    def wait(self) -> None:
        """Block until the server stops; returns on Ctrl-C after shutting down cleanly."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            self.shutdown()

    def shutdown(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> HubServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def serve(
    root: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tokens: Sequence[str] = (),
    user: str = DEFAULT_USER,
    fault_injection: bool = False,
    tree_page_size: int = TREE_PAGE_SIZE,
    oidc: OidcSettings | None = None,
    read_tokens: Mapping[str, Sequence[str]] | None = None,
) -> HubServer:
    """Start a Hub server on a background thread; `port=0` picks a free port (read it from `.url`).

    Without `tokens`, the server makes one (or reuses the one from an earlier start) and keeps it in
    `<root>/token` with mode 0600; `HubServer.token_file` names that file. `read_tokens` maps each read-only
    token to the private repos it may read (`hfrelease.hub.auth.ReadScope`).
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
        storage = HubStorage(root)
        credentials = Credentials.load(root, tokens, user=user)
        signer = UrlSigner(root)
    except OSError as error:
        raise errors.HubStartError(
            f"Cannot use {root} as the Hub server's root: {error}",
            hint="Pass a writable directory with --root.",
        ) from error
    stats, faults = HubStats(), FaultInjector()
    exchange = OidcExchange(oidc) if oidc is not None else None
    endpoints = Endpoints(
        storage=storage, collections=CollectionStore(root, tmp_dir=storage.tmp_dir), signer=signer,
        stats=stats, faults=faults, tree_page_size=tree_page_size, oidc=exchange,
    )  # fmt: skip
    app = _App(endpoints=endpoints, credentials=credentials, stats=stats, faults=faults,
               fault_injection=fault_injection, oidc=exchange, read_scopes=read_scopes(read_tokens or {}))  # fmt: skip
    try:
        httpd = _HTTPServer((host, port), app)
    except OSError as error:
        raise errors.HubStartError(
            f"Cannot listen on {host}:{port}: {error}", hint="Pick another --port, or 0 for any free port."
        ) from error
    bound_host, bound_port = httpd.server_address[:2]
    # A short poll interval makes `shutdown()` return promptly (tests start and stop many servers).
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="hfrelease-hub", daemon=True)
    thread.start()
    server = HubServer(
        url=f"http://{bound_host!s}:{bound_port}", root=root, token_file=credentials.token_file, faults=faults,
        _httpd=httpd, _thread=thread, _stats=stats,
    )  # fmt: skip
    logger.info("Hub server listening on %s (root %s)", server.url, root)
    return server


def run(settings: ServeSettings, *, announce: Callable[[str], None] = print) -> None:
    """Serve until interrupted: what `hfrelease hub serve` does once its options are parsed."""
    server = serve(
        settings.root, host=settings.host, port=settings.port, tokens=settings.tokens, user=settings.user,
        fault_injection=settings.fault_injection, tree_page_size=settings.tree_page_size,
    )  # fmt: skip
    announce(f"Hub server on {server.url} (root: {settings.root})")
    announce(f"HF_ENDPOINT={server.url}")
    announce("HF_HUB_DISABLE_XET=1 is needed in every client's environment: this Hub has no Xet storage")
    if server.token_file is not None:
        # The path, never the token: logs and CI output get copied around.
        announce(f"Write token stored in {server.token_file} (mode 0600): export HF_TOKEN=$(cat {server.token_file})")
    if settings.fault_injection:
        announce("Fault injection is ON (test-only): POST /api/_hfrelease/faults")
    server.wait()
