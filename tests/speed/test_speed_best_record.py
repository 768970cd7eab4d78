"""The best speculative config per workload, recorded in the ledger as a "speed-best" record."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest

from hfrelease.cards import read_inputs
from hfrelease.cards.inputs import entry_for
from hfrelease.cards.measurements import measure_family
from hfrelease.files.hashing import FileHash
from hfrelease.ledger.record import LedgerRecord, Metric, ServeRecord, input_key
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest
from hfrelease.speed.best_record import best_key, best_record, candidates, other_points, record_best_configs
from hfrelease.speed.noise import SessionNoise
from hfrelease.speed.result import row_from_record
from hfrelease.speed.verdict import BestConfig, best_configs, with_speedups

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LEDGER_DEMO = ROOT / "tests" / "fixtures" / "ledger_demo" / "results"
WHEN = "2026-08-01T10:00:00Z"
# A host's session noise as `hfrelease.speed.noise` measures it: 2 % per session, over 10 degrees of freedom.
NOISE = SessionNoise(sigma=0.02, df=10, groups=("reference/chat [none] c1 x11",))


@pytest.fixture(scope="module")
def demo() -> Manifest:
    """The demo family's manifest (chat lists none, ngram, draft, eagle3-untrained), which its ledger measured."""
    from tests.cards.card_fixtures import demo_manifest

    return demo_manifest()


def _sha(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _speed(spec: str, tps: float, *, workload: str = "chat", concurrency: int = 1, artifact: str = "reference",
           status: Literal["ok", "void"] = "ok", measurement: int = 0, input_len: int | None = None) -> LedgerRecord:
    """A speed record; `measurement` tells apart two measurements of the same point (another input key)."""
    draft = "draft" if spec == "draft" else None
    argv = ("vllm", "serve", "org/model", *(("--speculative-config", spec) if spec != "none" else ()))
    extra: dict[str, Any] = {"speculative": spec, "concurrency": concurrency, "repeats": 3, "failed": 0,
                             "spread": {"output_throughput": [tps - 2.0, tps + 2.0]}, "raw": [], "metrics_raw": [],
                             **({"input_len": input_len} if input_len else {})}
    return LedgerRecord(
        kind="speed-sweep" if input_len else "speed", family="demo", artifact_id=artifact,
        artifact_hash=_sha("weights", artifact),
        artifact_files=(FileHash(path="model.safetensors", size=1000, sha256=_sha("file", artifact)),),
        draft_artifact_id=draft, draft_hash=_sha("weights", draft) if draft else None, subject_id=workload,
        harness="vllm-bench", task=f"prompts/{workload}.jsonl", task_hash=_sha("prompts", workload),
        mode="non-thinking", n=8, seed=0, generation={"output_len": 32, "temperature": 0.0},
        metrics={"output_throughput": Metric(value=tps)} if status == "ok" else {}, truncated=0, empty=0,
        serve=ServeRecord(argv=argv, env={}, display=" ".join(argv)), versions={"vllm": "0.11.0"},
        hardware={"cpu": "test"}, started_at="2026-07-20T09:00:00Z", duration_s=30.0,
        input_key=input_key(artifact=artifact, workload=workload, spec=spec, c=concurrency, m=measurement,
                            **({"input_len": input_len} if input_len else {})),
        extra=extra, status=status,
        void_reason="server died" if status == "void" else None,
    )


def _records() -> list[LedgerRecord]:
    return [_speed("none", 50.0), _speed("ngram", 45.0), _speed("draft", 80.0),
            _speed("none", 120.0, concurrency=4), _speed("eagle3", 99.0, status="void"),
            _speed("none", 60.0, workload="longdoc"), _speed("none", 70.0, artifact="fp8-dynamic")]


def _best(demo: Manifest, records: list[LedgerRecord], noise: SessionNoise | None = NOISE
          ) -> dict[tuple[str, str], BestConfig]:
    rows = with_speedups([row_from_record(r, origin="measured") for r in records])
    return {(b.artifact_id, b.workload_id): b for b in best_configs(demo, rows, noise)}


def test_best_record_fields(demo: Manifest) -> None:
    """The winner's serve command, draft and task; its throughput and speedup; every candidate's numbers."""
    records = _records()
    best = _best(demo, records)[("reference", "chat")]
    found = candidates(best, records)
    record = best_record(best, found, started_at=WHEN, others=other_points(best, records))
    winner = records[2]

    # The ok batch-1 points of the workload on the artifact, in input-key order.
    assert {r.input_key for r in found} == {r.input_key for r in records[:3]}
    assert [r.input_key for r in found] == sorted(r.input_key for r in found)
    assert record.kind == "speed-best" and record.status == "ok"
    assert (record.artifact_id, record.subject_id, record.harness) == ("reference", "chat", "vllm-bench")
    assert (record.artifact_hash, record.artifact_files) == (winner.artifact_hash, winner.artifact_files)
    assert record.serve == winner.serve
    assert (record.draft_artifact_id, record.draft_hash) == ("draft", winner.draft_hash)
    assert (record.task, record.task_hash, record.mode, record.n, record.seed, record.generation) == (
        winner.task, winner.task_hash, winner.mode, winner.n, winner.seed, winner.generation)
    assert record.metrics == {"output_throughput": Metric(value=80.0), "speedup": Metric(value=1.6)}
    assert (record.started_at, record.duration_s) == (WHEN, 0)
    keys = sorted(r.input_key for r in records[:3])
    # The verdict also read the workload's other point (none at concurrency 4) and the session noise.
    assert record.input_key == input_key(kind="speed-best", candidates=keys, others=[records[3].input_key],
                                         noise=[0.02, 10, ["reference/chat [none] c1 x11"]])
    assert record.extra == {
        "speculative": "draft", "clear": True, "runner_up": "none", "derived_from": keys,
        "not_clear": None, "loses_at": [], "judged_over": [records[3].input_key],
        "session_noise": NOISE.as_dict(),
        "candidates": [
            {"speculative": "draft", "input_key": records[2].input_key, "output_throughput": 80.0,
             "spread": [78.0, 82.0], "speedup": 1.6},
            {"speculative": "none", "input_key": records[0].input_key, "output_throughput": 50.0,
             "spread": [48.0, 52.0], "speedup": 1.0},
            {"speculative": "ngram", "input_key": records[1].input_key, "output_throughput": 45.0,
             "spread": [43.0, 47.0], "speedup": 0.9},
        ],
    }


def test_no_baseline_no_speedup(demo: Manifest) -> None:
    """Without a batch-1 point served without speculation, the record has no speedup metric."""
    records = [_speed("ngram", 45.0), _speed("draft", 44.0)]
    best = _best(demo, records)[("reference", "chat")]
    record = best_record(best, candidates(best, records), started_at=WHEN)
    assert set(record.metrics) == {"output_throughput"}
    assert record.extra["speculative"] == "ngram" and record.extra["clear"] is False
    assert record.draft_artifact_id is None


def test_same_candidates_same_key(demo: Manifest) -> None:
    """The key depends on the candidate records only: their order and unrelated records do not matter."""
    records = _records()
    best = _best(demo, records)[("reference", "chat")]
    key = best_record(best, candidates(best, records), started_at=WHEN).input_key
    shuffled = list(reversed(records))
    assert best_record(best, candidates(best, shuffled), started_at="2027-01-01T00:00:00Z").input_key == key
    assert best_key(candidates(best, records[:3]), (), NOISE) == key
    judged = best_record(best, candidates(best, records), started_at=WHEN, others=other_points(best, records))
    assert judged.input_key == best_key(candidates(best, records), other_points(best, records), NOISE) != key

    remeasured = [*records[:1], _speed("ngram", 46.0, measurement=1), *records[2:]]
    best_again = _best(demo, remeasured)[("reference", "chat")]
    assert best_record(best_again, candidates(best_again, remeasured), started_at=WHEN).input_key != key


def test_best_config_must_be_a_candidate(demo: Manifest) -> None:
    """A best config that none of the candidate records served is refused, not recorded."""
    records = _records()
    best = replace(_best(demo, records)[("reference", "chat")], speculative="eagle3")
    with pytest.raises(ValueError, match="not among the candidate records"):
        best_record(best, candidates(best, records), started_at=WHEN)


def test_round_trips_through_the_ledger(demo: Manifest, tmp_path: Path) -> None:
    """Written, found again by its key; records(kind="speed") does not return it though its file is speed-*."""
    ledger = Ledger(tmp_path)
    records = _records()
    for record in records:
        ledger.write(record)
    best = _best(demo, records)[("reference", "chat")]
    record = best_record(best, candidates(best, records), started_at=WHEN)
    path = ledger.write(record)

    assert path.name.startswith("speed-best-chat-")
    assert ledger.latest(record.input_key) == record
    assert ledger.records(kind="speed-best") == [record]
    assert record not in ledger.records(kind="speed") and len(ledger.records(kind="speed")) == len(records)
    assert ledger.records(kind="gate") == []
    assert record in ledger.records()


def test_record_best_configs_writes_once(demo: Manifest, tmp_path: Path) -> None:
    """One record per best config; a warm re-run writes nothing; a re-measured candidate gives a new record."""
    ledger = Ledger(tmp_path)
    records = _records()
    best = list(_best(demo, records).values())

    first = record_best_configs(ledger, best, records, started_at=WHEN)
    again = record_best_configs(ledger, best, records, started_at="2026-08-02T10:00:00Z")

    assert len(first) == 3  # reference/chat, reference/longdoc, fp8-dynamic/chat
    assert again == []
    assert sorted((r.artifact_id, r.subject_id) for r in ledger.records(kind="speed-best")) == [
        ("fp8-dynamic", "chat"), ("reference", "chat"), ("reference", "longdoc")]

    remeasured = [*records[:2], _speed("draft", 30.0, measurement=1), *records[3:]]
    changed = list(_best(demo, remeasured).values())
    [path] = record_best_configs(ledger, changed, remeasured, started_at="2026-08-03T10:00:00Z")
    newest = LedgerRecord.from_json(path.read_bytes())
    assert newest.extra["speculative"] == "none" and newest.extra["runner_up"] == "ngram"


def test_cards_prefer_the_recorded_choice(demo: Manifest) -> None:
    """A speed-best record derived from exactly the card's batch-1 points decides; otherwise it is computed."""
    recorded = read_inputs(demo, ledger_root=LEDGER_DEMO)
    # The recorded demo run's own speed-best record agrees with what the card computes from its points.
    # The newest of the reference's chat choices (the release's draft job and `eval --speed` each recorded one).
    real = max((e for e in recorded.records if e.record.kind == "speed-best" and e.record.subject_id == "chat"
                and e.record.artifact_id == "reference"), key=lambda e: e.record.started_at)
    inputs = replace(recorded, records=tuple(e for e in recorded.records if e.record.kind != "speed-best"))
    computed = measure_family(inputs).best_batch1("reference", "chat")
    assert computed is not None and computed.speculative == real.record.extra["speculative"]
    assert measure_family(recorded).best_batch1("reference", "chat") == computed

    speed = [e.record for e in inputs.records if e.record.kind == "speed"]
    best = _best(demo, speed)[("reference", "chat")]
    found = candidates(best, speed)
    assert computed.speculative == best.speculative
    # A record choosing the runner-up (as a tie broken by the manifest's order could) is what the card shows.
    runner_up = "ngram" if computed.speculative != "ngram" else "none"
    chosen = best_record(replace(best, speculative=runner_up), found, started_at=WHEN)
    with_record = replace(inputs, records=(*inputs.records, entry_for(chosen)))
    point = measure_family(with_record).best_batch1("reference", "chat")
    assert point is not None and point.speculative == runner_up
    assert point.entry.record.kind == "speed"

    # Derived from other points than those shown (one of them is not a candidate): computed again.
    stale = best_record(replace(best, speculative=runner_up),
                        [r for r in found if r.extra["speculative"] != "eagle3-untrained"], started_at=WHEN)
    with_stale = replace(inputs, records=(*inputs.records, entry_for(stale)))
    point = measure_family(with_stale).best_batch1("reference", "chat")
    assert point is not None and point.speculative == computed.speculative


def test_a_best_config_that_loses_at_one_sweep_point_is_not_clear_and_names_it(demo: Manifest) -> None:
    """Issue 24: `draft` wins chat at batch 1 beyond session noise, but the context sweep measured it slower than
    `none` at 128 input tokens: its record says `clear: false` and names that point with both figures."""
    records = [*_records()[:3], _speed("none", 75.0, input_len=128), _speed("draft", 37.5, input_len=128),
               _speed("none", 60.0, input_len=256), _speed("draft", 70.0, input_len=256)]
    best = _best(demo, records)[("reference", "chat")]
    assert best.speculative == "draft" and best.not_clear is None  # the batch-1 win itself is clear
    assert not best.clear and best.loses_at == ("input 128 tokens: none 75.0 tok/s, draft 37.5",)
    record = best_record(best, candidates(best, records), started_at=WHEN, others=other_points(best, records))
    assert record.extra["clear"] is False
    assert record.extra["loses_at"] == ["input 128 tokens: none 75.0 tok/s, draft 37.5"]
    assert record.extra["judged_over"] == sorted(r.input_key for r in records[3:])


def test_no_win_is_clear_without_measured_session_noise(demo: Manifest) -> None:
    """Three back-to-back repeats say nothing of what varies between sessions: with no A/A group on the host, a
    1.6x batch-1 lead whose repeats do not overlap is still not a clear win, and the record says why."""
    best = _best(demo, _records(), noise=None)[("reference", "chat")]
    assert best.speculative == "draft" and not best.clear and best.loses_at == ()
    assert best.not_clear is not None and best.not_clear.startswith("session noise unmeasured")
    noisy = SessionNoise(sigma=0.2, df=2, groups=("a", "b"))  # t 4.30: 1.6x is inside exp(4.30 * 0.2 * 1.41)
    best = _best(demo, _records(), noise=noisy)[("reference", "chat")]
    assert not best.clear and best.not_clear is not None and best.not_clear.startswith("within session noise of none")
