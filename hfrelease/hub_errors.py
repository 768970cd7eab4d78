"""What a failed Hub request means to the user: one `HubError` (exit 7) naming the request and what to do.

huggingface_hub raises `HfHubHTTPError` for an HTTP error status (after its own retries of 429/5xx on the
requests it may repeat) and httpx2's `TransportError` when no answer came at all; hf_xet a plain error naming
the status and URL of its token request (a Hub without Xet storage answers that 501). Neither is a bug in
hfrelease, so neither may reach the CLI's "internal error" (exit 1): the publish steps wrap their Hub calls
with `hub_errors(...)`, which says what was being done, and the CLI classifies whatever else escapes.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from hfrelease.errors import HfreleaseError, HubError
from hfrelease.redact import redact

SCOPE_HINT = (
    "The Hub refused the token: check the token's scope. Publishing needs write access to every repo of the "
    "family (and to the namespace, to create a repo or the collection); reading a private or gated source needs "
    "read access to it. The token is HF_TOKEN, else the one `hf auth login` stored."
)


def hub_failure(error: BaseException, *, doing: str | None = None) -> HubError | None:
    """The `HubError` that `error` stands for, or None when it is not a Hub client's error."""
    # Without huggingface_hub imported, no error can come from it (and classifying must not import it).
    if "huggingface_hub" not in sys.modules:
        return None
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    prefix = f"{doing}: " if doing else ""
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return _http_failure(error, error.response, prefix)
    if isinstance(error, OfflineModeIsEnabled):
        # HF_HUB_OFFLINE=1 (scripts/offline.sh, CI) with a Hub off this machine: loopback Hubs are reached anyway
        # (`hfrelease.files.sources.hub_access`), so this is the setting, not a bug.
        return HubError(
            f"{prefix}HF_HUB_OFFLINE=1 keeps huggingface_hub from reaching a Hub off this machine ({error})",
            hint="Unset HF_HUB_OFFLINE to reach that Hub; a Hub on this machine (`--hub local`, or a loopback "
            "URL such as http://127.0.0.1:PORT) is reached with it set.",
        )
    if isinstance(error, LocalEntryNotFoundError) and error.__cause__ is not None:
        # hf_hub_download / snapshot_download raise a failed HEAD (a 404, 5xx, lost connection) as "cannot find
        # the requested files in the local cache", raised from the Hub's answer: that answer is the failure
        # (LocalEntryNotFoundError for a connection problem too: https://github.com/huggingface/huggingface_hub/pull/985).
        return hub_failure(error.__cause__, doing=doing)
    if isinstance(error, httpx2.TransportError):
        where = _origin(str(error.request.url)) if _has_request(error) else "the Hub"
        return HubError(
            f"{prefix}no answer from {where}: {type(error).__name__}: {redact(str(error)) or 'connection lost'}",
            hint="Check the network and the Hub's address (HF_ENDPOINT, --hub, [publish].endpoint), then run the "
            "same command again (a publish resumes where it stopped).",
        )
    return _xet_failure(error, prefix)


# hf_xet (Rust) asks for its token itself and raises a plain Python error with only the status and the URL:
# "... HTTP status server error (501 Not Implemented), domain: http://.../api/models/o/n/xet-write-token/main".
_XET_TOKEN = re.compile(
    r"HTTP status (?:client|server) error \((\d{3})([^)]*)\), domain: (\S+/xet-(?:write|read)-token/\S*)")


def _xet_failure(error: BaseException, prefix: str) -> HubError | None:
    """hf_xet's failure to get a Xet token: the Hub's answer, and for a 501 (a Hub without Xet storage, as
    hfrelease's built-in Hub) what to do, since hf_xet drops the answer's body that says it."""
    match = _XET_TOKEN.search(str(error))
    if match is None:
        return None
    status, reason, url = int(match.group(1)), match.group(2).strip(), match.group(3)
    said = f"the Hub answered HTTP {status} {reason}".rstrip() + f" to GET {url} (a Xet storage token)"
    if status == 501:
        return HubError(f"{prefix}{said}: this Hub does not serve Xet storage",
                        hint="Set HF_HUB_DISABLE_XET=1 in the environment (huggingface_hub then uploads and downloads "
                        "through LFS; hfrelease's built-in Hub has no Xet), then run the same command again.",
                        status=status)  # fmt: skip
    if status in (401, 403):
        return HubError(f"{prefix}{said}", hint=SCOPE_HINT, status=status)
    return HubError(f"{prefix}{said}", hint=f"The Hub at {_origin(url)} refused Xet storage: run the same command "
                    "again later, or set HF_HUB_DISABLE_XET=1 to upload and download through LFS.", status=status)


def _http_failure(error: BaseException, response: Any, prefix: str) -> HubError:
    status = response.status_code
    request = f"{response.request.method} {response.request.url}"
    said = _server_message(error)
    reason = f"HTTP {status} {response.reason_phrase}".rstrip()
    if status in (401, 403):
        return HubError(f"{prefix}{reason} from {request}{said}", hint=SCOPE_HINT, status=status)
    if status == 429:
        return HubError(
            f"{prefix}the Hub kept answering {reason} to {request}{said}",
            hint="The Hub is limiting the rate of this token or address: wait a few minutes, then run the same "
            "command again (a publish resumes where it stopped).",
            status=status,
        )
    if status >= 500:
        return HubError(
            f"{prefix}the Hub answered {reason} to {request}{said}",
            hint=f"The Hub at {_origin(str(response.request.url))} is failing: run the same command again "
            "later (a publish resumes where it stopped).",
            status=status,
        )
    return HubError(f"{prefix}the Hub refused {request}: {reason}{said}",
                    hint="The Hub's message above says why; nothing else was changed by this request.",
                    status=status)  # fmt: skip


@contextlib.contextmanager
def hub_errors(doing: str) -> Iterator[None]:
    """Turn a Hub client's error raised in the block into a `HubError` that says it happened while `doing`."""
    try:
        yield
    except HfreleaseError:
        raise
    except Exception as error:
        failure = hub_failure(error, doing=doing)
        if failure is None:
            raise
        raise failure from error


def describe(error: BaseException) -> str:
    """One line for an error inside a longer message: the Hub's status and request when it is a Hub error."""
    if isinstance(error, HfreleaseError):
        return error.message
    failure = hub_failure(error)
    if failure is not None:
        return failure.message
    return redact(f"{type(error).__name__}: {error}")


def is_auth_failure(error: BaseException) -> bool:
    """A 401/403 from the Hub, directly or as the cause of another error."""
    seen: BaseException | None = error
    while seen is not None:
        failure = seen if isinstance(seen, HubError) else hub_failure(seen)
        if failure is not None:
            return failure.status in (401, 403)
        seen = seen.__cause__
    return False


def _server_message(error: BaseException) -> str:
    message = getattr(error, "server_message", None)
    return f" ({redact(' '.join(str(message).split()))})" if message else ""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def _has_request(error: BaseException) -> bool:
    try:
        return getattr(error, "request", None) is not None
    except RuntimeError:  # httpx raises RuntimeError when an error was made without a request
        return False
