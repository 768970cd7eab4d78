"""Ledger records and the ledger directory: validation, redaction, atomic content-addressed files, merging."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hfrelease.errors import LedgerError, UsageError
from hfrelease.files.hashing import FileHash
from hfrelease.ledger import store
from hfrelease.ledger.record import LedgerRecord, Sample, input_key
from hfrelease.ledger.store import SPILL_BYTES, Ledger

pytestmark = pytest.mark.unit

HF_TOKEN = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2"
API_KEY = "sk-" + "proj0123456789abcdefghijKLMN"
SHORT_SECRET = "hunter2hunter2"  # no token shape: only the flag name says it is a secret
KEY = input_key(artifact="fp8", task_hash="t1")


def make_record(**overrides: Any) -> LedgerRecord:
    """A valid gate record over 4 samples (3 correct); `overrides` replace any field."""
    samples = [
        {"doc_id": i, "score": float(i != 3), "truncated": False, "empty": False, "response": f"answer {i}"}
        for i in range(4)
    ]
    fields: dict[str, Any] = {
        "kind": "gate",
        "family": "tiny",
        "artifact_id": "fp8",
        "artifact_hash": "a" * 64,
        "artifact_files": (FileHash(path="model.safetensors", size=10, sha256="b" * 64),),
        "subject_id": "gsm8k",
        "harness": "lm-eval",
        "task": "gsm8k",
        "task_hash": "t1",
        "mode": "non-thinking",
        "n": len(samples),
        "seed": 1234,
        "generation": {"max_tokens": 512, "temperature": 0.0},
        "metrics": {"exact_match": {"value": 0.75, "stderr": 0.25}},
        "samples": samples,
        "truncated": 0,
        "empty": 0,
        "serve": {"argv": ["vllm", "serve", "m"], "env": {}, "display": "vllm serve m"},
        "versions": {"vllm": "0.11.0", "lm_eval": "0.4.13"},
        "hardware": {"cpu": "test"},
        "started_at": "2025-06-01T12:00:00Z",
        "duration_s": 12.5,
        "input_key": KEY,
    }
    fields.update(overrides)
    return LedgerRecord(**fields)


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# --- the record ---------------------------------------------------------------------------------


def test_input_key_is_sha256_of_canonical_json() -> None:
    """input_key is sha256 of sorted-key, whitespace-free JSON, so argument order does not matter."""
    expected = hashlib.sha256(b'{"a":1,"b":[1,2],"c":{"x":null}}').hexdigest()
    assert input_key(b=[1, 2], a=1, c={"x": None}) == expected
    assert input_key(a=1, b=(1, 2), c={"x": None}) == expected
    assert input_key(a=2, b=[1, 2], c={"x": None}) != expected


def test_record_round_trips_through_json() -> None:
    """A record read back from its JSON equals the original, including int doc ids stored as strings."""
    record = make_record()
    again = LedgerRecord.from_json(record.to_json())
    assert again == record
    assert again.samples[0].doc_id == "0"
    assert again.to_json() == record.to_json()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"truncated": 5, "samples": (), "n": 4}, "they cannot exceed n"),
        ({"status": "void"}, "needs a void_reason"),
        ({"started_at": "2025-06-01T14:00:00+02:00"}, "must be in UTC"),
        ({"n": 5}, "n = 5 but 4 samples"),
        ({"draft_artifact_id": "eagle"}, "go together"),
        ({"samples_file": "../../etc/passwd.samples.jsonl.gz", "samples_sha256": "c" * 64, "samples": ()}, "pattern"),
        ({"kind": "speed", "samples": (), "extra": {"raw": ["../../etc/x.bench.jsonl"]}}, "not a bare file name"),
        ({"kind": "speed", "samples": (), "extra": {"metrics_raw": "m.metrics.txt"}}, "must be a list of file names"),
    ],
)
def test_inconsistent_records_are_refused(overrides: dict[str, Any], message: str) -> None:
    """Records that would misstate a measurement (wrong counts, a void without its reason, ...) cannot exist."""
    with pytest.raises(ValidationError, match=re.escape(message)):
        make_record(**overrides)


def test_truncated_gate_can_be_recorded_void() -> None:
    """A gate with truncated answers is recordable as void with a reason."""
    record = make_record(truncated=2, samples=(), status="void", void_reason="2 of 4 answers hit max_tokens")
    assert record.status == "void"


def test_secrets_never_reach_the_written_file(tmp_path: Path) -> None:
    """Tokens in env, argv (by shape or by flag name) and the display line are redacted in the file on disk."""
    serve = {
        "argv": ["vllm", "serve", "m", "--api-key", API_KEY, f"--hf-token={SHORT_SECRET}",
                 "--max-num-batched-tokens", "8192"],
        "env": {"HF_TOKEN": HF_TOKEN, "VLLM_ATTENTION_BACKEND": "TRITON_ATTN"},
        "display": f"HF_TOKEN={HF_TOKEN} vllm serve m --api-key {API_KEY} --hf-token={SHORT_SECRET}",
    }
    path = Ledger(tmp_path).write(make_record(serve=serve))
    text = path.read_text()

    for secret in (HF_TOKEN, API_KEY, SHORT_SECRET):
        assert secret not in text
    record = LedgerRecord.from_json(path.read_bytes())
    assert record.serve.argv[3:] == ("--api-key", "***", "--hf-token=***", "--max-num-batched-tokens", "8192")
    assert record.serve.env == {"HF_TOKEN": "***", "VLLM_ATTENTION_BACKEND": "TRITON_ATTN"}


# --- the ledger directory -------------------------------------------------------------------------


def test_content_addressed_name_is_stable(tmp_path: Path) -> None:
    """The file name is artifact/kind-subject-key12-sha12 of the bytes; writing the same record again is a no-op."""
    ledger = Ledger(tmp_path)
    record = make_record()
    path = ledger.write(record)
    content = path.read_bytes()

    expected = f"fp8/gate-gsm8k-{KEY[:12]}-{hashlib.sha256(content).hexdigest()[:12]}.json"
    assert path.relative_to(tmp_path).as_posix() == expected
    assert ledger.write(make_record()) == path
    assert _files(tmp_path) == [expected]
    assert ledger.write(make_record(duration_s=13.0)) != path


def test_write_leaves_no_temp_files(tmp_path: Path) -> None:
    """After a write, the directory holds the record and nothing else."""
    Ledger(tmp_path).write(make_record())
    assert [name.endswith(".json") for name in _files(tmp_path)] == [True]


def test_crash_mid_write_leaves_no_partial_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the final rename fails, neither the record nor its temp file is left behind."""

    def crash(src: object, dst: object) -> None:
        raise OSError("disk pulled")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk pulled"):
        Ledger(tmp_path).write(make_record())
    assert _files(tmp_path) == []
    assert Ledger(tmp_path).records() == []


def test_records_filters(tmp_path: Path) -> None:
    """records() filters by artifact, subject and kind, and returns oldest first."""
    ledger = Ledger(tmp_path)
    ledger.write(make_record(started_at="2025-06-02T00:00:00Z"))
    ledger.write(make_record(subject_id="mmlu", started_at="2025-06-01T00:00:00Z"))
    ledger.write(make_record(artifact_id="nvfp4", started_at="2025-06-03T00:00:00Z"))

    assert [r.subject_id for r in ledger.records(artifact_id="fp8")] == ["mmlu", "gsm8k"]
    assert [r.artifact_id for r in ledger.records(subject_id="gsm8k")] == ["fp8", "nvfp4"]
    assert ledger.records(kind="speed") == []


def test_latest_ignores_void_records(tmp_path: Path) -> None:
    """latest() is the newest ok record for the key; a newer void one does not count."""
    ledger = Ledger(tmp_path)
    assert ledger.latest(KEY) is None
    ledger.write(make_record(started_at="2025-06-01T00:00:00Z", duration_s=1.0))
    ledger.write(make_record(started_at="2025-06-02T00:00:00Z", duration_s=2.0))
    ledger.write(make_record(started_at="2025-06-03T00:00:00Z", status="void", void_reason="server died"))

    latest = ledger.latest(KEY)
    assert latest is not None
    assert latest.duration_s == 2.0
    assert ledger.latest(input_key(artifact="other")) is None


def test_edited_record_is_detected(tmp_path: Path) -> None:
    """A record whose bytes no longer match its name (hand-edited) is a LedgerError, not a silent number."""
    ledger = Ledger(tmp_path)
    path = ledger.write(make_record())
    path.write_text(path.read_text().replace('"value": 0.75', '"value": 0.95'))
    with pytest.raises(LedgerError, match="does not match its content"):
        ledger.records()


def _big_samples(count: int = 3000) -> list[dict[str, Any]]:
    return [
        {"doc_id": f"doc-{i}", "score": float(i % 3 == 0), "truncated": False, "empty": i % 50 == 0,
         "response": "reasoning " * 12, "target": str(i), "tokens": i}
        for i in range(count)
    ]


def test_large_samples_spill_and_round_trip(tmp_path: Path) -> None:
    """Samples over ~256 KiB go to a content-addressed .samples.jsonl.gz and load back identical."""
    samples = _big_samples()
    assert len(json.dumps(samples)) > SPILL_BYTES
    record = make_record(samples=samples, n=len(samples), empty=60)
    ledger = Ledger(tmp_path)
    path = ledger.write(record)

    stored = LedgerRecord.from_json(path.read_bytes())
    assert stored.samples == ()
    assert stored.samples_file is not None
    spilled = tmp_path / "fp8" / stored.samples_file
    assert re.fullmatch(rf"gate-gsm8k-{KEY[:12]}-[0-9a-f]{{12}}\.samples\.jsonl\.gz", spilled.name)
    assert hashlib.sha256(gzip.decompress(spilled.read_bytes())).hexdigest() == stored.samples_sha256
    assert ledger.load_samples(stored) == record.samples
    assert ledger.load_samples(stored)[1] == Sample(
        doc_id="doc-1", score=0.0, truncated=False, empty=False, response="reasoning " * 12, target="1", tokens=1
    )

    spilled.write_bytes(gzip.compress(b'{"doc_id": "x"}\n'))
    with pytest.raises(LedgerError, match="do not match the sha256"):
        ledger.load_samples(stored)


def test_a_value_edited_by_hand_is_refused_where_it_claims_its_samples_mean(tmp_path: Path) -> None:
    """A record whose value is its samples' mean says so; an edited value (the file renamed to its new content's
    hash, as the repair hint says) is refused when the record is read, inline or spilled, never rendered."""
    claim = {"metric": "exact_match", "value": 0.75, "value_from_samples": "mean"}
    make_record(extra=claim)  # 3 of 4 samples score 1: the claim holds
    with pytest.raises(ValidationError, match=r"value 0.8 is not the mean of its 4 samples' scores \(0.75\)"):
        make_record(extra={**claim, "value": 0.8}, metrics={"exact_match": {"value": 0.8, "stderr": 0.25}})
    # Written both places, the two must agree: an edit of one of them is refused as well.
    with pytest.raises(ValidationError, match=r"extra.value 0.8 is not metrics\['exact_match'\]"):
        make_record(extra={"metric": "exact_match", "value": 0.8})
    # A metric aggregated otherwise (corpus F1) claims nothing and is not recomputed.
    make_record(extra={"metric": "exact_match", "value": 0.6}, metrics={"exact_match": {"value": 0.6, "stderr": 0.2}})

    ledger = Ledger(tmp_path)
    spilled_claim = {"metric": "exact_match", "value": 1 / 3, "value_from_samples": "mean"}
    record = make_record(samples=_big_samples(), n=3000, empty=60, extra=spilled_claim,
                         metrics={"exact_match": {"value": 1 / 3, "stderr": 0.01}})
    path = ledger.write(record)
    assert len(ledger.load_samples(LedgerRecord.from_json(path.read_bytes()))) == 3000
    data = json.loads(path.read_bytes())
    data["extra"]["value"] = data["metrics"]["exact_match"]["value"] = 0.5
    edited = LedgerRecord.model_validate(data)  # spilled samples are checked when they are read
    with pytest.raises(LedgerError, match="is not the mean of its 3000 samples' scores"):
        ledger.load_samples(edited)


def test_samples_files_are_read_within_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A samples file that inflates past the limit (a bomb), or that is a FIFO, is a LedgerError at once: never
    read whole into memory, never waited on."""
    record = make_record(samples=_big_samples(), n=3000, empty=60)
    ledger = Ledger(tmp_path)
    stored = LedgerRecord.from_json(ledger.write(record).read_bytes())
    assert stored.samples_file is not None
    spilled = tmp_path / "fp8" / stored.samples_file
    monkeypatch.setattr(store, "SAMPLES_LIMIT", 64 * 1024)
    with pytest.raises(LedgerError, match="decompresses to more than 65,536 bytes"):
        ledger.load_samples(stored)
    spilled.unlink()
    os.mkfifo(spilled)
    with pytest.raises(LedgerError, match="not a regular file"):
        ledger.load_samples(stored)


def test_merge_two_machines(tmp_path: Path) -> None:
    """Merging two independently written ledgers keeps every record, reports identical ones, never overwrites."""
    machine_a, machine_b, main = Ledger(tmp_path / "a"), Ledger(tmp_path / "b"), Ledger(tmp_path / "main")
    shared = make_record()
    a_only = machine_a.write(make_record(subject_id="mmlu"))
    b_only = machine_b.write(make_record(artifact_id="nvfp4", samples=_big_samples(), n=3000, empty=60))
    machine_a.write(shared)
    machine_b.write(shared)
    kept = main.write(make_record(subject_id="ifeval"))

    first = main.merge([machine_a.root, machine_b.root])
    second = main.merge([machine_a.root, machine_b.root])

    assert len(first.added) == 3
    assert [p.name for p in first.identical] == [machine_b.write(shared).name]
    assert first.skipped_invalid == ()
    assert second.added == ()
    assert len(second.identical) == 4
    assert {r.subject_id for r in main.records()} == {"gsm8k", "mmlu", "ifeval"}
    assert kept.exists()
    assert (main.root / a_only.relative_to(machine_a.root)).read_bytes() == a_only.read_bytes()
    merged = LedgerRecord.from_json((main.root / b_only.relative_to(machine_b.root)).read_bytes())
    assert len(main.load_samples(merged)) == 3000


def test_merge_reports_invalid_files_without_copying(tmp_path: Path) -> None:
    """A broken JSON file or a tampered record in a source is reported, not copied, and not fatal."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    good = source.write(make_record())
    tampered = source.write(make_record(subject_id="mmlu"))
    tampered.write_text(tampered.read_text().replace('"value": 0.75', '"value": 0.99'))
    broken = tmp_path / "job" / "fp8" / "gate-x-000000000000-000000000000.json"
    broken.write_text("{oops")

    report = main.merge([source.root])

    assert [p.name for p in report.added] == [good.name]
    assert sorted(s.path for s in report.skipped_invalid) == sorted([tampered, broken])
    assert _files(main.root) == [good.relative_to(source.root).as_posix()]


def test_merge_never_overwrites_a_differing_file(tmp_path: Path) -> None:
    """A source file whose name exists in the ledger with other bytes is skipped, and the ledger's copy kept."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    path = main.write(make_record())
    original = path.read_bytes()
    (source.root / "fp8").mkdir(parents=True)
    (source.root / path.relative_to(main.root)).write_bytes(original + b" ")  # valid JSON, different bytes

    report = main.merge([source.root])

    assert report.added == ()
    assert len(report.skipped_invalid) == 1
    assert path.read_bytes() == original


# --- raw benchmark files of speed records -----------------------------------------------------------

BENCH = b'{"output_throughput": 41.5, "completed": 4}\n'
SNAPSHOTS = b"# before\nvllm:spec_decode_num_drafts_total 0\n# after\nvllm:spec_decode_num_drafts_total 12\n"


def _raw_name(content: bytes, suffix: str) -> str:
    return f"speed-chat-{KEY[:12]}-{hashlib.sha256(content).hexdigest()[:12]}.{suffix}"


def _write_speed(ledger: Ledger, files: dict[str, bytes] | None = None) -> tuple[Path, dict[str, Path]]:
    """A speed record and its raw files, written as the speed runner writes them (files first)."""
    files = files if files is not None else {_raw_name(BENCH, "bench.jsonl"): BENCH,
                                             _raw_name(SNAPSHOTS, "metrics.txt"): SNAPSHOTS}
    record = make_record(
        kind="speed", subject_id="chat", harness="vllm-bench", samples=(),
        metrics={"output_throughput": {"value": 41.5}},
        extra={"speculative": "none", "concurrency": 1,
               "raw": [n for n in files if n.endswith(".bench.jsonl")],
               "metrics_raw": [n for n in files if n.endswith(".metrics.txt")]},
    )
    paths: dict[str, Path] = {}
    for name, content in files.items():
        paths[name] = ledger.root / "fp8" / name
        paths[name].parent.mkdir(parents=True, exist_ok=True)
        paths[name].write_bytes(content)
    return ledger.write(record), paths


def test_merge_copies_the_raw_files_a_speed_record_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench JSONL and /metrics snapshots land beside the merged record, before it; re-merging is a no-op."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    record_path, raw = _write_speed(source)
    order: list[str] = []
    real_write = store.write_atomic

    def logged(path: Path, data: bytes) -> None:
        order.append(path.name)
        real_write(path, data)

    monkeypatch.setattr(store, "write_atomic", logged)

    first = main.merge([source.root])

    assert [p.name for p in first.added] == [record_path.name] and first.skipped_invalid == ()
    assert order[-1] == record_path.name and sorted(order[:-1]) == sorted(raw)  # a record never points at nothing
    for name, path in raw.items():
        assert (main.root / "fp8" / name).read_bytes() == path.read_bytes()
    merged = main.records(kind="speed")[0]
    assert [main.raw_path(merged, n).read_bytes() for n in sorted(raw)] == [raw[n].read_bytes() for n in sorted(raw)]
    with pytest.raises(LedgerError, match="not a raw file"):
        main.raw_path(merged, "../other.bench.jsonl")

    before = {p: p.read_bytes() for p in (main.root / "fp8").iterdir()}
    order.clear()
    second = main.merge([source.root])
    assert second.added == () and second.skipped_invalid == ()
    assert [p.name for p in second.identical] == [record_path.name]
    assert order == []
    assert {p: p.read_bytes() for p in (main.root / "fp8").iterdir()} == before


def test_merge_skips_a_speed_record_whose_raw_file_is_missing(tmp_path: Path) -> None:
    """A record naming a raw file its ledger lacks is reported with the file, and nothing of it is copied."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    record_path, raw = _write_speed(source)
    raw[_raw_name(BENCH, "bench.jsonl")].unlink()

    report = main.merge([source.root])

    assert report.added == ()
    [skipped] = report.skipped_invalid
    assert skipped.path == record_path
    assert "raw benchmark file" in skipped.reason and "is missing" in skipped.reason
    assert _raw_name(BENCH, "bench.jsonl") in skipped.reason
    assert _files(main.root) == []


def test_merge_skips_a_speed_record_whose_raw_file_was_tampered_with(tmp_path: Path) -> None:
    """A raw file whose bytes no longer match the sha256 in its name is reported, and nothing is copied."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    record_path, raw = _write_speed(source)
    raw[_raw_name(BENCH, "bench.jsonl")].write_bytes(BENCH.replace(b"41.5", b"91.5"))

    report = main.merge([source.root])

    assert report.added == ()
    assert [(s.path, "does not match the sha256 in its name" in s.reason) for s in report.skipped_invalid] == [
        (record_path, True)]
    assert _files(main.root) == []


def test_merge_never_overwrites_a_differing_raw_file(tmp_path: Path) -> None:
    """A raw file already in the ledger with other bytes is kept, and the record naming it is skipped."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    _write_speed(source)
    kept = main.root / "fp8" / _raw_name(BENCH, "bench.jsonl")
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"something else\n")

    report = main.merge([source.root])

    assert report.added == ()
    assert len(report.skipped_invalid) == 1 and f"differs from {kept}" in report.skipped_invalid[0].reason
    assert kept.read_bytes() == b"something else\n"
    assert main.records() == []


def test_merge_refuses_raw_names_that_are_not_content_addressed(tmp_path: Path) -> None:
    """A raw name without the content hash loads (older records) but is not merged: it cannot be verified."""
    source, main = Ledger(tmp_path / "job"), Ledger(tmp_path / "main")
    record_path, _ = _write_speed(source, {"chat-none-c1-r0.bench.jsonl": BENCH})
    assert len(source.records(kind="speed")) == 1

    report = main.merge([source.root])

    assert [s.path for s in report.skipped_invalid] == [record_path]
    assert "not a content-addressed" in report.skipped_invalid[0].reason
    assert _files(main.root) == []


@pytest.mark.parametrize("ledger_dir", ["tests/fixtures/ledger_demo/results", "model_cards/demo/results"])
def test_committed_ledgers_merge_whole(ledger_dir: str, tmp_path: Path) -> None:
    """The committed demo ledgers are valid under these rules: merged into an empty ledger, every file comes along."""
    root = Path(__file__).resolve().parents[2] / ledger_dir
    main = Ledger(tmp_path / "main")

    report = main.merge([root])

    assert report.skipped_invalid == ()
    assert _files(main.root) == [f for f in _files(root) if not f.startswith(".")]


def test_merge_takes_a_single_artifact_download_extracted_flat(tmp_path: Path) -> None:
    """download-artifact >= v5 extracts a lone matched `ledger-*` artifact flat into `ledgers/`, so `ledgers/*`
    names artifact directories: each is merged as part of the ledger at its parent (was "0 added", exit 0)."""
    job = Ledger(tmp_path / "job")
    written = [job.write(make_record()), job.write(make_record(artifact_id="nvfp4", samples=_big_samples(),
                                                               n=3000, empty=60))]
    ledgers = tmp_path / "ledgers"
    for path in job.root.rglob("*"):  # the artifact's files, extracted with no `ledger-<artifact>/` level
        if path.is_file():
            (ledgers / path.relative_to(job.root)).parent.mkdir(parents=True, exist_ok=True)
            (ledgers / path.relative_to(job.root)).write_bytes(path.read_bytes())
    main = Ledger(tmp_path / "main")

    report = main.merge(sorted(ledgers.iterdir()))  # what the shell makes of `ledgers/*`

    assert sorted(p.relative_to(main.root) for p in report.added) == sorted(p.relative_to(job.root) for p in written)
    assert report.skipped_invalid == ()
    assert _files(main.root) == _files(job.root)
    assert len(main.load_samples(main.records(artifact_id="nvfp4")[0])) == 3000


def test_merge_refuses_records_where_no_ledger_keeps_them(tmp_path: Path) -> None:
    """Records nested deeper than `<artifact-id>/<record>.json` are an error naming them, never "0 added"."""
    job = Ledger(tmp_path / "download" / "ledger-fp8" / "model_cards" / "tiny" / "results")
    job.write(make_record())

    with pytest.raises(UsageError, match=r"none where a ledger keeps its records") as caught:
        Ledger(tmp_path / "main").merge([tmp_path / "download"])
    assert "model_cards/tiny/results/fp8/gate-gsm8k-" in caught.value.message
    assert not (tmp_path / "main").exists()
