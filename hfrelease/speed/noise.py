"""Session noise: how far one server session's speed figure moves when nothing it measures changed.

A speed record is one server session: its repeats run back to back on one server, so their spread holds
nothing of what varies between sessions (the host's load and clocks, the server's start-up, memory layout).
That term is measured, never assumed, from **A/A groups**: one measurement (same input key: weights, draft,
vLLM, prompts, workload, serve command) recorded in two or more sessions on the same hardware (the same
`hardware` of its records) -- a key recorded twice in one ledger, or a row whose inputs did not change
between two ledgers. Each session gives one value, the median of its repeats, on a log scale: the noise is a
share of the throughput (a busy host slows 60 and 180 tok/s alike), not a fixed number of tok/s.

The model is a one-way random effect per session, its variance pooled over the groups (the variance
estimate of a one-way ANOVA, every group centred on its own mean):

    s^2 = sum_g sum_i (ln x_gi - mean_g)^2 / df,    df = sum_g (n_g - 1)

`s` is the standard deviation of one session's log value about what the measurement would give on
average; it holds the repeats' own noise and the session's together, since every A/A session carries both.
A measurement A of m_a sessions compared with B of m_b sessions (each side's value the median of all its
repeats) has the 95 % interval

    ln(B / A) +/- t(0.975, df) * s * sqrt(1 / m_a + 1 / m_b)

B is faster than A beyond session noise when the lower bound is above 0. Student's t with the pooled df
makes the interval as wide as few groups warrant (df = 1: t = 12.7; df = 4: 2.78; df = 10: 2.23). What is
pooled (one `s` for every measurement on that hardware) is the assumption: a relative noise common to the
host's measurements, which the A/A groups can be checked against.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hfrelease.ledger.record import JsonDict, LedgerRecord

CONFIDENCE = 0.95
METRIC = "output_throughput"


# Student's t, its 0.975 quantile for 1 to 30 degrees of freedom (to 6 decimals, as tables print it).
_T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
         2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
         2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
_Z975 = 1.959963984540054


def t_quantile(df: int) -> float:
    """Student's t 0.975 quantile with `df` degrees of freedom: the table to 30, then the Cornish-Fisher
    expansion about the normal quantile (within 2e-6 of the exact value from 30 on)."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


@dataclass(frozen=True, kw_only=True)
class SessionNoise:
    """The pooled session noise of one host's speed measurements (see the module's docstring)."""

    sigma: float  # standard deviation of one session's ln(value)
    df: int  # degrees of freedom: sum over the A/A groups of (sessions - 1)
    groups: tuple[str, ...]  # what it was measured from: one label per A/A group

    @property
    def t(self) -> float:
        return t_quantile(self.df)

    def log_interval(self, old: float, new: float, *, sessions_old: int = 1, sessions_new: int = 1
                     ) -> tuple[float, float]:
        """The 95 % interval of ln(new / old), two measurements of `sessions_*` sessions each."""
        centre = math.log(new / old)
        half = self.t * self.sigma * math.sqrt(1 / sessions_old + 1 / sessions_new)
        return centre - half, centre + half

    def ratio_interval(self, old: float, new: float, *, sessions_old: int = 1, sessions_new: int = 1
                       ) -> tuple[float, float]:
        """The 95 % interval of new / old."""
        low, high = self.log_interval(old, new, sessions_old=sessions_old, sessions_new=sessions_new)
        return math.exp(low), math.exp(high)

    def describe(self) -> str:
        """One line a report prints: the spread of one session, and what it was measured from."""
        return (f"session noise ±{100 * (math.exp(self.sigma) - 1):.1f} % per session (s.d. of ln tok/s "
                f"{self.sigma:.3f}, df {self.df}, t {self.t:.2f}; from {len(self.groups)} A/A "
                f"group{'s' if len(self.groups) != 1 else ''}: {', '.join(self.groups)})")

    def as_dict(self) -> JsonDict:
        return {"sigma_log": self.sigma, "df": self.df, "t": self.t, "groups": [*self.groups]}


def pooled(groups: Mapping[str, Sequence[float]]) -> SessionNoise | None:
    """The pooled session noise of A/A `groups` (label -> each session's value); None without a group of
    two sessions or more (nothing measured: no verdict may then claim to exceed the session noise)."""
    squares = 0.0
    df = 0
    used: list[str] = []
    for label, values in groups.items():
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) < 2:
            continue
        mean = math.fsum(logs) / len(logs)
        squares += math.fsum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
        used.append(label)
    if df == 0:
        return None
    return SessionNoise(sigma=math.sqrt(squares / df), df=df, groups=tuple(sorted(used)))


def hardware_of(record: LedgerRecord) -> str:
    """The host a record was measured on, as A/A groups compare it."""
    return json.dumps(record.hardware, sort_keys=True)


def sessions(records: Iterable[LedgerRecord]) -> dict[tuple[str, str], list[LedgerRecord]]:
    """The ok speed records (workload points and sweep points) per (input key, hardware): each list one
    measurement's sessions, oldest first; a record present twice (a ledger carried into the next) counts once."""
    found: dict[tuple[str, str], dict[tuple[str, float], LedgerRecord]] = {}
    for record in records:
        if record.kind in ("speed", "speed-sweep") and record.status == "ok" and METRIC in record.metrics:
            key = (record.input_key, hardware_of(record))
            found.setdefault(key, {})[(record.started_at, record.metrics[METRIC].value)] = record
    return {key: [by[k] for k in sorted(by)] for key, by in found.items()}


def _label(record: LedgerRecord) -> str:
    speculative = record.extra.get("speculative", "none")
    where = f" input {record.extra['input_len']}" if record.extra.get("input_len") else ""
    return f"{record.artifact_id}/{record.subject_id} [{speculative}] c{record.extra.get('concurrency', 1)}{where}"


def ledger_noise(records: Iterable[LedgerRecord]) -> SessionNoise | None:
    """The session noise measured by the A/A groups among `records` (several ledgers' records together
    when a comparison spans them)."""
    groups: dict[str, list[float]] = {}
    for found in sessions(records).values():
        if len(found) > 1:
            label = f"{_label(found[0])} x{len(found)}"
            while label in groups:  # the same point on two hosts
                label += "'"
            groups[label] = [r.metrics[METRIC].value for r in found]
    return pooled(groups)


def host_noise(records: Iterable[LedgerRecord], measured: Iterable[LedgerRecord]) -> SessionNoise | None:
    """The session noise of the hosts `measured` ran on, from the A/A groups among `records` (a ledger's)."""
    hosts = {hardware_of(r) for r in measured}
    return ledger_noise(r for r in records if hardware_of(r) in hosts)
