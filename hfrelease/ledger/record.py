"""One ledger record: a measurement's result and everything needed to trust and reproduce it.

A record carries the artifact's content hash, the exact serve command and environment (redacted again
here, whatever the caller did: a second line of defence, because records are committed and published),
harness and library versions, hardware, date, n, seed, task hash and per-sample outcomes. A measurement
that could not be trusted (answers cut off, requests failed) is recorded with `status = "void"` and a
reason, never as a low score: a gate record with truncated answers cannot be "ok".

`input_key` decides whether a measurement must be re-run: see its docstring.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    model_validator,
)

from hfrelease.files.hashing import FileHash
from hfrelease.manifest.fields import Slug
from hfrelease.redact import REDACTED, redact, redact_env, secret_values

SCHEMA_VERSION: Literal[1] = 1

# "speed-best": the best speculative config of one (artifact, workload), derived from its batch-1 speed
# records (see `hfrelease.speed.best_record`); it measures nothing itself.
# "speed-sweep": one point of a workload's context-length sweep (`input_lens`), measured as a speed point is.
Kind = Literal["gate", "speed", "speed-best", "speed-sweep"]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Count = Annotated[StrictInt, Field(ge=0)]
JsonDict = dict[str, JsonValue]

# A samples file is a bare name in the record's own directory: a record merged from another machine
# must not be able to point at a file anywhere else.
_SAMPLES_FILE = r"^[A-Za-z0-9][A-Za-z0-9._-]*\.samples\.jsonl\.gz$"
# The same for the raw benchmark files a speed record names in `extra["raw"]` / `extra["metrics_raw"]`.
# Only the bare-name part is checked here, so records whose names predate the content-addressed
# `*.bench.jsonl` / `*.metrics.txt` scheme stay readable; `Ledger.merge` copies only content-addressed
# names (`RAW_FILE`) whose bytes match the hash in the name.
_BARE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# A fidelity gate's record names its raw `/v1/completions` responses in `extra["fidelity_raw"]`.
RAW_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*-(?P<sha>[0-9a-f]{12})"
                      r"\.(?P<type>bench\.jsonl|metrics\.txt|fidelity\.jsonl|requests\.jsonl)$")
# A batch-1 speed point names its per-request outputs and counters in `extra["requests_raw"]`
# (`hfrelease.speed.per_request`).
RAW_KEYS = {"raw": "bench.jsonl", "metrics_raw": "metrics.txt", "fidelity_raw": "fidelity.jsonl",
            "requests_raw": "requests.jsonl"}  # extra key -> type
_RAW_KEYS_OF: dict[str, tuple[str, ...]] = {"speed": ("raw", "metrics_raw", "requests_raw"),
                                            "speed-sweep": ("raw", "metrics_raw"),
                                            "gate": ("fidelity_raw",)}
# Flags whose value is a credential: the flag's last word is a secret word (`--api-key`, `--hf-token`).
# Matching the last word, not a substring, keeps `--max-num-batched-tokens 8192` in the serve command.
_SECRET_FLAG = re.compile(r"(^|_)(token|api_?key|secret|password|passwd|private_key|credentials?)$", re.I)


def input_key(**inputs: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, no whitespace) of what decides a measurement's result.

    Pass everything that, if changed, makes an old result wrong: artifact hash, draft hash, task hash,
    gate or workload settings, serve settings, harness versions. A record with the same key is reused
    instead of measuring again. Anything not in the key (wall time, hardware, date) does not trigger a
    re-run: two measurements differing only in those are taken to be the same measurement. Values must
    be JSON types (tuples count as lists); note that 1 and 1.0 are different keys, so pass settings from
    the typed manifest, not hand-written literals.
    """
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _iso_utc(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an ISO 8601 date-time") from exc
    if parsed.utcoffset() != timedelta(0):
        raise ValueError(f"{value!r} must be in UTC (end it with Z or +00:00)")
    return value


def _doc_id(value: object) -> object:
    # lm-eval numbers its documents; custom harnesses use strings. One type, so pairing never misses
    # because 7 != "7".
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Metric(_Model):
    value: float
    stderr: float | None = None


class Sample(BaseModel):
    """One scored document; harness-specific fields (filtered answers, token counts) are kept as extras."""

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)

    doc_id: Annotated[str, BeforeValidator(_doc_id)]
    score: float
    truncated: StrictBool
    empty: StrictBool  # empty `content`: a reasoning model that never got to its answer
    response: str | None = None
    target: JsonValue = None


class ServeRecord(_Model):
    """The serve command as measured: `argv`, the environment it ran with, and the line printed in cards."""

    argv: tuple[str, ...]
    env: dict[str, str]
    display: str

    @model_validator(mode="before")
    @classmethod
    def _redact(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        argv, env, display = data.get("argv"), data.get("env"), data.get("display")
        if not (isinstance(argv, list | tuple) and all(isinstance(a, str) for a in argv)):
            return data  # field validation reports it
        if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            return data
        clean_argv, hidden = redact_argv(argv)
        result = {**data, "argv": clean_argv, "env": redact_env(env)}
        if isinstance(display, str):
            result["display"] = redact(display, extra=[*hidden, *secret_values(env)])
        return result


def redact_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """`argv` with credentials hidden, and the values hidden (to scrub them from the display line too)."""
    clean: list[str] = []
    hidden: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            hide_next = False
            if arg != REDACTED:
                hidden.append(arg)
            clean.append(REDACTED)
            continue
        flag, equals, value = arg.partition("=")
        if arg.startswith("-") and _SECRET_FLAG.search(flag.lstrip("-").replace("-", "_")):
            if equals:
                if value != REDACTED:
                    hidden.append(value)
                clean.append(f"{flag}={REDACTED}")
            else:
                clean.append(arg)
                hide_next = True
            continue
        clean.append(redact(arg))
    return clean, hidden


class LedgerRecord(_Model):
    """One measurement (a gate's or a speed workload's) of one artifact, with its provenance."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Kind
    family: Slug
    artifact_id: Slug
    artifact_hash: Sha256
    artifact_files: tuple[FileHash, ...]
    draft_artifact_id: Slug | None = None
    draft_hash: Sha256 | None = None
    subject_id: Slug  # the gate id or workload id
    harness: Literal["lm-eval", "custom", "vllm-bench", "fidelity"]
    task: str = Field(min_length=1)
    task_hash: str | None
    mode: Literal["thinking", "non-thinking"]
    n: Count
    seed: StrictInt | None
    generation: JsonDict  # max_tokens, temperature, top_p, ...
    metrics: dict[str, Metric]
    samples: tuple[Sample, ...] = ()
    samples_file: Annotated[str, Field(pattern=_SAMPLES_FILE)] | None = None  # set when samples spilled
    samples_sha256: Sha256 | None = None  # of the uncompressed JSONL, so gzip's own bytes do not matter
    truncated: Count
    empty: Count
    serve: ServeRecord
    versions: dict[str, str]
    hardware: JsonDict
    started_at: Annotated[str, AfterValidator(_iso_utc)]
    duration_s: float = Field(ge=0)
    input_key: Sha256
    extra: JsonDict = Field(default_factory=dict)
    status: Literal["ok", "void"] = "ok"
    void_reason: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> LedgerRecord:
        if (self.draft_artifact_id is None) != (self.draft_hash is None):
            raise ValueError("draft_artifact_id and draft_hash go together")
        if (self.samples_file is None) != (self.samples_sha256 is None):
            raise ValueError("samples_file and samples_sha256 go together")
        if self.samples_file is not None and self.samples:
            raise ValueError("samples are either inline or in samples_file, not both")
        if self.samples:
            check_samples(self, self.samples)
        _check_headline(self)
        if self.truncated > self.n or self.empty > self.n:
            raise ValueError("truncated and empty count samples: they cannot exceed n")
        raw_files(self)  # raises on a name that is not a bare file name
        if self.status == "void" and not self.void_reason:
            raise ValueError("a void record needs a void_reason")
        if self.status == "ok" and self.void_reason is not None:
            raise ValueError("void_reason is only for void records")
        # A gate whose answers were cut off is a failed measurement, not a low score. Where
        # the line lies is the gate's `max_truncated` share (evaluation decides); an ok record keeps
        # its counts so a card can say how many answers were cut off.
        return self

    def to_json(self) -> bytes:
        """Canonical bytes (sorted keys, fixed indentation): identical records are identical files."""
        data = self.model_dump(mode="json")
        return (json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> LedgerRecord:
        return cls.model_validate_json(data)


def raw_files(record: LedgerRecord) -> list[tuple[str, str]]:
    """(extra key, file name) of each raw file a record keeps beside it.

    A speed record's keys are `extra["raw"]` (`*.bench.jsonl`) and `extra["metrics_raw"]` (`*.metrics.txt`),
    a fidelity gate's `extra["fidelity_raw"]` (`*.fidelity.jsonl`). Raise ValueError unless each is a list
    of bare file names (no directory, no leading dot): a record merged from another machine must not be
    able to point at a file outside its own directory.
    """
    found: list[tuple[str, str]] = []
    for key in _RAW_KEYS_OF.get(record.kind, ()):
        value = record.extra.get(key)
        if value is None:
            continue
        names = [name for name in value if isinstance(name, str)] if isinstance(value, list) else []
        if not isinstance(value, list) or len(names) != len(value):
            raise ValueError(f"extra.{key} must be a list of file names")
        for name in names:
            if not _BARE_FILE.fullmatch(name):
                raise ValueError(f"extra.{key}: {name!r} is not a bare file name")
            found.append((key, name))
    return found


# A gate record whose value is the mean of its samples' scores says so when it is measured (every lm-eval task
# that aggregates by mean, the fidelity gate, a custom gate that reports a mean); its value is then recomputed
# from the samples whenever they are read (render, compare, check --cards, bundle), so a value edited by hand
# (and the file renamed to its new content's hash) is refused instead of rendered. A metric aggregated
# otherwise (F1, BLEU over the corpus) carries no such claim and is not recomputed.
VALUE_FROM_SAMPLES = "value_from_samples"
_SAME = 1e-9


def value_is_sample_mean(value: float | None, scores: Sequence[float]) -> bool:
    """Whether `value` is the mean of `scores` (what a record then claims in `extra.value_from_samples`)."""
    return bool(scores) and value is not None and abs(math.fsum(scores) / len(scores) - value) <= _SAME * max(
        1.0, abs(value))


def _check_headline(record: LedgerRecord) -> None:
    """A gate record's value is written twice (`extra.value` and `metrics[extra.metric]`): both must agree."""
    metric, value = record.extra.get("metric"), record.extra.get("value")
    if record.kind != "gate" or record.status != "ok" or not isinstance(metric, str) or value is None:
        return
    if metric not in record.metrics or not isinstance(value, int | float) or abs(
            record.metrics[metric].value - value) > _SAME * max(1.0, abs(value)):
        raise ValueError(f"extra.value {value!r} is not metrics[{metric!r}] "
                         f"({record.metrics[metric].value if metric in record.metrics else 'missing'})")


def check_samples(record: LedgerRecord, samples: Sequence[Sample]) -> None:
    """Raise ValueError unless the record's counts (and, where it claims to be their mean, its value) agree with
    its per-sample outcomes."""
    if len(samples) != record.n:
        raise ValueError(f"n = {record.n} but {len(samples)} samples")
    if record.extra.get(VALUE_FROM_SAMPLES) == "mean":
        value = record.extra.get("value")
        scores = [s.score for s in samples]
        if not isinstance(value, int | float) or not value_is_sample_mean(float(value), scores):
            mean = math.fsum(scores) / len(scores) if scores else float("nan")
            raise ValueError(f"the value {value!r} is not the mean of its {len(scores)} samples' scores "
                             f"({mean:.6g}), as the record says it is")
    truncated = sum(s.truncated for s in samples)
    empty = sum(s.empty for s in samples)
    if (truncated, empty) != (record.truncated, record.empty):
        raise ValueError(
            f"truncated/empty = {record.truncated}/{record.empty} but the samples say {truncated}/{empty}"
        )
