"""What a verdict implies, in one place: its exit code, whether it blocks a publish, whether its reason is shown.

Every outcome a gate (or a draft gate, or a server) can have is one `Outcome`; `gate_verdict`
(`hfrelease.verdicts.verdict`) decides the gate verdicts, `hfrelease.speed.drafts` the draft gates', and the
release decision adds `missing` (no record for the current inputs). Eval's and speed's exit status, the
release decision (`hfrelease.publish.decision`), `publish`'s own gate check (`hfrelease.publish.gates`) and the
views (`hfrelease.stages.eval_view`, `hfrelease.ci.github`) all read this table, so `hfrelease eval` and
`hfrelease release --only gate` exit alike on the same ledger.

The order, most serious first: a dead server (5) > a result that cannot be trusted or judged: void,
no-reference, missing (6) > a failed gate (4) > ok (0). `no-reference` is 6 everywhere: a gate whose artifact
could not be compared with the reference is not a pass (README, "Exit codes"), and the release stops on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from hfrelease.errors import ExitCode

# A gate's verdict (`Verdict`), a speed point's status ("ok", "void"), a draft gate's ("pass", "fail", "void",
# "missing"), the release decision's "missing" (no record for the current inputs), or "server" (one died).
Outcome = Literal["server", "void", "no-reference", "missing", "fail", "pass", "reference", "ok"]


@dataclass(frozen=True, kw_only=True)
class Consequence:
    """What one outcome implies."""

    exit_code: ExitCode
    blocks_publish: bool  # of a published artifact: the release stops before publishing
    shows_reason: bool  # the gate table prints its reason beside the verdict
    recorded_failure: bool  # a result recorded and not passing: `publish` refuses it without --allow-failed-gates


CONSEQUENCES: dict[str, Consequence] = {
    "server": Consequence(exit_code=ExitCode.SERVER_FAILED, blocks_publish=True, shows_reason=True,
                          recorded_failure=False),
    "void": Consequence(exit_code=ExitCode.MEASUREMENT_FAILED, blocks_publish=True, shows_reason=True,
                        recorded_failure=True),
    # A result that is not there to judge: `publish` cannot tell it from a family not evaluated on this
    # machine, so it is said, and the release job's decision stops on it.
    "no-reference": Consequence(exit_code=ExitCode.MEASUREMENT_FAILED, blocks_publish=True, shows_reason=True,
                                recorded_failure=False),
    "missing": Consequence(exit_code=ExitCode.MEASUREMENT_FAILED, blocks_publish=True, shows_reason=True,
                           recorded_failure=False),
    "fail": Consequence(exit_code=ExitCode.GATE_FAILED, blocks_publish=True, shows_reason=True,
                        recorded_failure=True),
    "pass": Consequence(exit_code=ExitCode.OK, blocks_publish=False, shows_reason=False, recorded_failure=False),
    "reference": Consequence(exit_code=ExitCode.OK, blocks_publish=False, shows_reason=False,
                             recorded_failure=False),
    "ok": Consequence(exit_code=ExitCode.OK, blocks_publish=False, shows_reason=False, recorded_failure=False),
}

# When several outcomes meet (gates and speed anchors, many rows), the exit status is the most serious one.
ORDER = (ExitCode.SERVER_FAILED, ExitCode.MEASUREMENT_FAILED, ExitCode.GATE_FAILED, ExitCode.OK)


def consequence(outcome: str) -> Consequence:
    """The consequence of `outcome`; an outcome this table does not know is a bug, never a pass."""
    try:
        return CONSEQUENCES[outcome]
    except KeyError:
        raise ValueError(f"unknown verdict {outcome!r}: add it to hfrelease.verdicts.severity") from None


def worst(*codes: ExitCode) -> ExitCode:
    """The most serious of `codes` (a code outside `ORDER` is more serious than any in it); OK when none."""
    return min(codes, key=lambda c: ORDER.index(c) if c in ORDER else -1, default=ExitCode.OK)


def exit_code(outcomes: Iterable[str]) -> ExitCode:
    """The exit status of a run whose results had `outcomes`: the most serious one's code."""
    return worst(*(consequence(o).exit_code for o in outcomes))


def blocks_publish(outcome: str) -> bool:
    return consequence(outcome).blocks_publish


def shows_reason(outcome: str) -> bool:
    return consequence(outcome).shows_reason


def recorded_failure(outcome: str) -> bool:
    return consequence(outcome).recorded_failure
