"""How long one request to a server may take, derived from its generation budget.

A request that generates at most N tokens takes a prefill plus N decode steps. Below
`MIN_TOKENS_PER_SECOND` per request (a loaded CPU server running a small model, or a GPU server at
full concurrency, both decode several times faster) a request is taken as stuck, not slow. The floor
`BASE_SECONDS` covers prefill, queueing behind the other concurrent requests and a first request's
warm-up. A gate's or workload's `request_timeout` replaces the derived value.

lm-eval's own request timeout would otherwise be whatever hfrelease passes (its default is 300 s), and it
retries a timed-out request `MAX_RETRIES` times: the stall watchdog (`hfrelease.serving.stall`) ends the
wait on a server that stopped answering long before that.
"""

from __future__ import annotations

import math

from hfrelease.manifest import Gate, Workload

MIN_TOKENS_PER_SECOND = 4.0
BASE_SECONDS = 60.0
# lm-eval's attempts per request (its `max_retries`); a request that timed out every time fails the gate.
MAX_RETRIES = 3
# A server whose vLLM token counters do not move for this long while requests are outstanding is stalled
# (or the request timeout, when that is shorter).
STALL_SECONDS = 60.0


def budget_timeout(max_tokens: int) -> float:
    """The derived per-request timeout (seconds) for a generation budget of `max_tokens` tokens."""
    return float(math.ceil(BASE_SECONDS + max_tokens / MIN_TOKENS_PER_SECOND))


def gate_request_timeout(gate: Gate) -> float:
    """Seconds one request of `gate` may take: its `request_timeout`, else derived from `max_tokens`."""
    return gate.request_timeout if gate.request_timeout is not None else budget_timeout(gate.max_tokens)


def workload_request_timeout(workload: Workload) -> float:
    """Seconds one request of `workload` may take: its `request_timeout`, else derived from `output_len`."""
    return workload.request_timeout if workload.request_timeout is not None else budget_timeout(workload.output_len)


def stall_window(request_timeout: float) -> float:
    """How long a server may show no progress while requests are outstanding before it counts as stalled."""
    return min(STALL_SECONDS, request_timeout)
