"""Which class of failure a gate's failed requests are: a measurement that cannot be trusted, or a dead server.

A request that still fails after lm-eval's attempts is counted, by kind (`request_failure_kind`), not
raised through lm-eval's asyncio tasks (which printed "Task exception was never retrieved" once per
request and then reached the CLI as "a bug"). Past the gate's threshold the gate stops with
`RequestsFailedError` (exit 6, how many failed and how). Then the server is asked whether it can serve at
all (`engine_down`): vLLM's /health answers 503 once its engine core is dead (the API process lives on and
answers every request with an error), and nothing answers once the process is gone. Either is the
server's death, exit 5, whether hfrelease started the server or attached to it with `--endpoint`.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Mapping

from hfrelease.errors import MeasurementError, ServerError

HEALTH_TIMEOUT = 5.0  # seconds: a live server answers /health at once, even under load
TIMED_OUT = "no answer within the request timeout"


class RequestsFailedError(MeasurementError):
    """Too many of a gate's requests failed after every attempt: the gate is void, never scored (exit 6)."""

    def __init__(self, *, gate: str, failed: int, total: int, kinds: Mapping[str, int], attempts: int,
                 allowed: int, base_url: str, sequential: bool = False) -> None:  # fmt: skip
        self.failed, self.total, self.kinds, self.base_url = failed, total, dict(kinds), base_url
        self.gate, self.attempts, self.allowed, self.sequential = gate, attempts, allowed, sequential
        how = ", ".join(f"{kind}: {count}" for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]))
        slow = (f" If the requests are just slow, raise request_timeout of gate {gate!r} (derived from max_tokens "
                "when unset).") if TIMED_OUT in kinds else ""  # fmt: skip
        super().__init__(
            f"gate {gate}: {failed} of {total} requests failed after {attempts} attempt{'s' if attempts != 1 else ''} "
            f"each ({how}); "
            + ("lm-eval sends them one at a time (num_concurrent = 1) and cannot go past a failed one, so the rest "
               "were not sent" if sequential else
               f"more than {allowed} failed (its max_truncated share), so the rest were not sent"),
            hint=f"The server at {base_url} failed these requests: its log says why. Run the same command again "
            f"once it serves: recorded gates are kept and this one resumes from its answered requests.{slow}",
        )


def request_failure_kind(error: BaseException) -> str:
    """How a request failed, in a few words that group alike failures: "HTTP 500 Internal Server Error"."""
    status = getattr(error, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int):
        return f"HTTP {status} {getattr(error, 'message', '')}".rstrip()
    response = getattr(error, "response", None)  # requests.HTTPError
    code = getattr(response, "status_code", None)
    if isinstance(code, int):
        return f"HTTP {code} {getattr(response, 'reason', '') or ''}".rstrip()
    names = {cls.__name__ for cls in type(error).__mro__}
    if isinstance(error, TimeoutError | asyncio.TimeoutError) or names & {"ServerTimeoutError", "Timeout"}:
        return TIMED_OUT
    if isinstance(error, ConnectionRefusedError) or names & {"ClientConnectorError"}:
        return "connection refused"
    if names & {"ServerDisconnectedError", "ClientOSError", "ConnectionError", "RemoteDisconnected"}:
        return "connection lost"
    return f"{type(error).__name__}: {error}"[:160]


def engine_down(base_url: str, *, timeout: float = HEALTH_TIMEOUT) -> str | None:
    """Why the server at `base_url` cannot serve at all, or None when its /health says it can."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/health", timeout=timeout):  # noqa: S310 - the gate's server
            return None
    except urllib.error.HTTPError as error:
        # vLLM answers 503 when its engine core has died; any other status is a server that is up.
        return "its engine is dead (/health answers 503)" if error.code == 503 else None
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return f"it no longer answers ({reason})"


def classify_gate_failure(failure: MeasurementError, *, base_url: str, gate: str, attached: bool) -> ServerError | None:
    """The server's death behind a gate's failure (exit 5), or None when the server still serves (the gate
    stays a void measurement, exit 6)."""
    down = engine_down(base_url)
    if down is None:
        return None
    if attached:
        hint = ("Restart the server behind --endpoint (its log says why it died), then run the same command: "
                "recorded gates are kept.")  # fmt: skip
    else:
        hint = "The server log in the run directory says why. Run the same command again: recorded gates are kept."
    return ServerError(f"the server at {base_url} died during gate {gate}: {down}; {failure.message}", hint=hint)
