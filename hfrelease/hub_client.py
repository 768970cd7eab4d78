"""huggingface_hub's HTTP client with bounded waits: a Hub that never answers fails, it does not hang.

huggingface_hub (2.x) sends every request through one shared httpx client made with `timeout=None`, and
most `HfApi` calls (repo_info, list_repo_tree, create_commit, ...) pass `timeout=None` explicitly, which
overrides any client default: only downloads are bounded (HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT).
A Hub that accepts the connection and never answers hung `publish` for good. So hfrelease installs a
client (`huggingface_hub.set_client_factory`) that gives every request without a bound a connect timeout
and a read timeout (the longest silence between two bytes, so a large upload that keeps moving is never
cut), and retries idempotent requests (GET, HEAD) after a timeout, a dropped connection, or an answer of
408, 429 or 5xx (the statuses huggingface_hub's own `http_backoff` retries, waiting what a `Retry-After`
asks, up to `MAX_PAUSE`). huggingface_hub retries those answers only for a file's download: HfApi's reads
(repo_info, list_repo_tree, list_repo_refs: the publish plan's, verify's and the preflight's) raised the
first 429 or 503. Other requests (a commit) are never sent twice: a lost reply to one is read back from the
Hub by the publish code.

`HFRELEASE_HUB_TIMEOUT` (seconds) sets the read timeout; a Hub that does not answer at all costs at most
`ATTEMPTS` times it, plus the pauses between attempts. What the final timeout means to the user (exit 7)
is `hfrelease.hub_errors`' to say.

Two switches of the client's own output are here too: its tqdm bars off while a caller draws its own
progress (`progress_bars_off`), and its debug log of each request (`log_requests`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

TIMEOUT_VARIABLE = "HFRELEASE_HUB_TIMEOUT"
READ_SECONDS = 30.0
CONNECT_SECONDS = 10.0
ATTEMPTS = 3  # for GET and HEAD; 1 for anything else
MAX_PAUSE = 30.0  # seconds: the longest wait a Retry-After gets before the next attempt
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS"})
# huggingface_hub.utils._http._DEFAULT_RETRY_ON_STATUS_CODES: answers that say "try again later".
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def read_timeout(env: Mapping[str, str] | None = None) -> float:
    """The read timeout: HFRELEASE_HUB_TIMEOUT when it is a positive number, else READ_SECONDS."""
    raw = (os.environ if env is None else env).get(TIMEOUT_VARIABLE, "")
    try:
        value = float(raw)
    except ValueError:
        return READ_SECONDS
    return value if value > 0 else READ_SECONDS


def bounded_client_factory(
    *, read: float | None = None, connect: float = CONNECT_SECONDS, attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> Callable[[], httpx2.Client]:
    """A client factory for `huggingface_hub.set_client_factory`: huggingface_hub's own client settings
    (its request hook, redirects followed) with bounded, retried requests."""
    import httpx2
    from huggingface_hub.utils._http import hf_request_event_hook

    bound = read_timeout() if read is None else read

    class BoundedClient(httpx2.Client):
        def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx2.Request:
            request = super().build_request(method, url, **kwargs)
            timeout = dict(request.extensions.get("timeout") or {})
            for name, default in (("connect", connect), ("read", bound), ("write", bound), ("pool", connect)):
                if timeout.get(name) is None:
                    timeout[name] = default
            request.extensions = {**request.extensions, "timeout": timeout}
            return request

        def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
            tries = attempts if request.method in _IDEMPOTENT else 1
            for attempt in range(1, tries + 1):
                pause = min(2.0 ** (attempt - 1), 8.0)
                try:
                    response = super().send(request, **kwargs)
                except (httpx2.TimeoutException, httpx2.NetworkError):
                    if attempt >= tries:
                        raise
                else:
                    if response.status_code not in RETRY_STATUSES or attempt >= tries:
                        return response
                    pause = _retry_after(response.headers.get("Retry-After"), pause)
                    response.close()  # a streamed answer holds its connection until closed
                sleep(pause)
            raise AssertionError("unreachable")

    def factory() -> httpx2.Client:
        return BoundedClient(event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True)

    return factory


def _retry_after(header: str | None, default: float) -> float:
    """The pause a `Retry-After: <seconds>` asks for, at most MAX_PAUSE; `default` without one (or a date)."""
    try:
        seconds = float(header) if header is not None else default
    except ValueError:
        return default
    return min(max(seconds, 0.0), MAX_PAUSE)


def install(*, read: float | None = None) -> None:
    """Make huggingface_hub use the bounded client from now on (in this process)."""
    from huggingface_hub import set_client_factory

    set_client_factory(bounded_client_factory(read=read))


@contextlib.contextmanager
def progress_bars_off() -> Iterator[None]:
    """huggingface_hub's tqdm bars off while the block runs, back on after if they were on: a caller drawing
    its own progress on the terminal would be garbled by them, and already counts the bytes they would."""
    # Documented public helpers, exported lazily by huggingface_hub.utils, which mypy cannot see (made lazy in
    # https://github.com/huggingface/huggingface_hub/pull/4914; the lazy facades' typing:
    # https://github.com/huggingface/huggingface_hub/issues/1662).
    from huggingface_hub.utils import (  # type: ignore[attr-defined]
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    were_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not were_disabled:
            enable_progress_bars()


def log_requests() -> None:
    """huggingface_hub's debug log on: each request as a curl command, its token replaced by <TOKEN>."""
    import logging

    logging.getLogger("huggingface_hub").setLevel(logging.DEBUG)
