"""Fault injection — a TEST-ONLY facility, off unless the server is started with `fault_injection=True`.

Tests of retry and recovery logic need the Hub to misbehave on cue. A `FaultRule` names which requests it
hits and what happens to them:

    FaultRule(endpoint="preupload", status=503, times=2)          # two 503s, then normal answers
    FaultRule(status=429, retry_after=1, times=1)                 # one 429 on the next request of any kind
    FaultRule(endpoint="lfs-upload", status=500, times=1)         # the LFS PUT fails once (body is drained)
    FaultRule(endpoint="commit", drop_connection=True, after=True) # commit lands, connection drops, no answer
    FaultRule(repo="alice/broken", status=500, times=None)        # everything about one repo fails, always
    FaultRule(endpoint="commit", revision="main", status=500)    # commits to main fail, to a branch work
    FaultRule(endpoint="commit", stall=5, drop_connection=True)   # no answer for 5 s (a client's timeout), then none

`endpoint` is one of the names in `hfrelease.hub.server.ENDPOINTS` (the same names the stats use); `None`
matches every endpoint. `revision` matches the revision a request names in its path (commit, preupload,
tree, repo-info at a revision, ...), so a rule can fail a release's commit to main but not its staging
branch; requests naming no revision never match a rule that sets one. `after=True` applies the request
first and then fails (status or dropped connection), which is how a lost response to a successful commit
looks from the client. `stall` holds the answer (or the dropped connection) back that many seconds: a Hub
slower than the client's read timeout (`HFRELEASE_HUB_TIMEOUT`). `times=None` means forever. Rules are
tried in the order added; the first that matches fires.

Rules are set in-process with `HubServer.faults.add(...)`, or over HTTP when fault injection is on:

    POST   /api/_hfrelease/faults   body: one rule or a list of rules, as JSON objects with the fields above
    GET    /api/_hfrelease/faults   the active rules and how often each has fired
    DELETE /api/_hfrelease/faults   remove all rules
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class FaultRule:
    endpoint: str | None = None
    method: str | None = None
    repo: str | None = None  # "namespace/name"
    revision: str | None = None  # as named in the request path, decoded: "main", "hfrelease/staging/v1.0"
    status: int | None = None
    retry_after: int | None = None
    drop_connection: bool = False
    after: bool = False
    stall: float = 0.0  # seconds to wait before failing
    times: int | None = 1

    def __post_init__(self) -> None:
        if (self.status is None) == (not self.drop_connection):
            raise ValueError("a fault rule needs exactly one of `status` or `drop_connection=True`")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError(f"fault status must be an HTTP error status, got {self.status}")
        if not 0 <= self.stall <= 600:
            raise ValueError(f"`stall` must be 0 to 600 seconds, got {self.stall}")
        if self.times is not None and self.times < 1:
            raise ValueError("`times` must be a positive count, or None for forever")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FaultRule:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault rule fields: {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)

    def matches(self, *, endpoint: str, method: str, repo: str | None, revision: str | None = None) -> bool:
        return (
            (self.endpoint is None or self.endpoint == endpoint)
            and (self.method is None or self.method.upper() == method)
            and (self.repo is None or self.repo == repo)
            and (self.revision is None or self.revision == revision)
        )


@dataclass
class _Armed:
    rule: FaultRule
    fired: int = 0


class FaultInjector:
    """The active rules; thread-safe, since the server answers requests on many threads."""

    def __init__(self) -> None:
        self._rules: list[_Armed] = []
        self._lock = threading.Lock()

    def add(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules.append(_Armed(rule))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(
        self, *, endpoint: str, method: str, repo: str | None, after: bool, revision: str | None = None
    ) -> FaultRule | None:
        """The rule that fires for this request at this phase (before or after applying it), if any."""
        with self._lock:
            for armed in self._rules:
                rule = armed.rule
                if rule.after == after and rule.matches(endpoint=endpoint, method=method, repo=repo, revision=revision):
                    armed.fired += 1
                    if rule.times is not None and armed.fired >= rule.times:
                        self._rules.remove(armed)
                    return rule
            return None

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{**dataclasses.asdict(a.rule), "fired": a.fired} for a in self._rules]
