"""Fidelity gates: the figures, the requests, the records with raw responses beside them, and the verdict.

A small fake of vLLM's OpenAI server answers `/v1/models` and `/v1/completions` (greedy continuations,
`prompt_logprobs` with ranks as vLLM sends them) on 127.0.0.1 for several models: the reference, a close
quant (its logits nudged a little) and a far one (nudged a lot).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from hfrelease.errors import ConfigError
from hfrelease.evaluation.fidelity import (
    PositionLogprobs,
    figures_from_raw,
    parse_prompt_logprobs,
    position_kl,
    summarize,
)
from hfrelease.evaluation.fidelity_gate import read_raw
from hfrelease.evaluation.plan import describe_gate, model_files, plan_eval
from hfrelease.evaluation.runner import run_eval
from hfrelease.files.hashing import HashCache
from hfrelease.ledger.record import Sample, raw_files
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.verdicts.verdict import judge_samples

pytestmark = pytest.mark.unit

VOCAB = 16
REFERENCE = "upstream/Fixture-1M"
QUANT = "tester/Fixture-1M-FP8-Dynamic"


def _logprobs(model: str, prefix: Sequence[int], nudges: Mapping[str, float]) -> np.ndarray:
    """A deterministic next-token distribution of `prefix`; other models are the reference's logits nudged."""
    state = sum((i + 1) * t for i, t in enumerate(prefix)) + len(prefix)
    logits = 3.0 * np.cos(np.arange(VOCAB) * 0.7 + state * 1.3)
    nudge = nudges.get(model, 0.0)
    if nudge:
        logits = logits + nudge * np.sin(np.arange(VOCAB) * 2.1 + state * 0.9)
    return logits - np.log(np.exp(logits).sum())  # type: ignore[no-any-return]


class FakeVllm(ThreadingHTTPServer):
    def __init__(self, nudges: Mapping[str, float]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.nudges = dict(nudges)
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        model = body["model"]
        prompt = body["prompt"]
        ids = list(prompt) if isinstance(prompt, list) else [1 + ord(c) % (VOCAB - 1) for c in prompt]
        generated: list[int] = []
        for _ in range(body["max_tokens"]):
            generated.append(int(np.argmax(_logprobs(model, ids + generated, self.nudges))))
        choice: dict[str, Any] = {"index": 0, "text": "", "finish_reason": "length"}
        if body.get("return_token_ids"):
            choice |= {"prompt_token_ids": ids, "token_ids": generated}
        k = body.get("prompt_logprobs")
        if k is not None:
            positions: list[dict[str, Any] | None] = [None]
            for i in range(1, len(ids)):
                lp = _logprobs(model, ids[:i], self.nudges)
                order = np.argsort(-lp, kind="stable")
                rank = {int(t): r + 1 for r, t in enumerate(order)}
                keep = [int(t) for t in order[:k]] + [ids[i]]
                positions.append({str(t): {"logprob": float(lp[t]), "rank": rank[t], "decoded_token": f"<{t}>"}
                                  for t in keep})
            choice["prompt_logprobs"] = positions
        return {"id": "cmpl-1", "object": "text_completion", "model": model, "choices": [choice]}


class _Handler(BaseHTTPRequestHandler):
    server: FakeVllm

    def _send(self, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": m, "object": "model"} for m in (REFERENCE, QUANT)]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send(self.server.complete(body))

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def _no_gpu_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The record's hardware probe runs nvidia-smi, a process the unit tests' seal refuses."""
    from hfrelease.evaluation import records

    monkeypatch.setattr(records, "hardware", lambda served=None: {"cpu": "test", **(served or {})})


@pytest.fixture
def fake_vllm(request: pytest.FixtureRequest) -> Iterator[FakeVllm]:
    server = FakeVllm(getattr(request, "param", {QUANT: 0.05}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


FIDELITY_GATE = """
[[gate]]
id = "fidelity"
label = "Fidelity"
fidelity = "prompts/fidelity.jsonl"
top_k = 5
max_tokens = 12
max_kl = 0.05
max_flip_rate = 0.2
"""


@pytest.fixture
def family(fixture_family: Path) -> Manifest:
    for name, seed in (("ref", 0), ("fp8", 1), ("draft", 2)):
        weights = np.random.default_rng(seed).standard_normal((4, 4)).astype("float32")
        save_file({"w": weights}, str(fixture_family / "checkpoints" / name / "model.safetensors"))
    prompts = [{"id": f"p{i}", "prompt": text} for i, text in enumerate(
        ["The colour of the sky", "2 + 3 =", "Once upon a time", "Copy: abcabc", "JSON: {", "hello", "x y z", "10"])]
    (fixture_family / "prompts" / "fidelity.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    manifest = fixture_family / "release.toml"
    manifest.write_text(manifest.read_text().replace("[[speculative]]", FIDELITY_GATE + "\n[[speculative]]", 1))
    return load_manifest(fixture_family)


def _run(family: Manifest, server: FakeVllm, tmp_path: Path) -> tuple[Ledger, Any]:
    ledger = Ledger(family.ledger_dir)
    plan = plan_eval(family, ledger=ledger, hash_cache=HashCache(tmp_path / "h.json"), gates=["fidelity"])
    return ledger, run_eval(plan, ledger=ledger, run_dir=tmp_path / "run", endpoint=server.url)


def _fidelity_record(ledger: Ledger, artifact: str) -> Any:
    (record,) = ledger.records(artifact_id=artifact, subject_id="fidelity")
    return record


def test_position_kl_is_zero_for_equal_and_grows_with_disagreement() -> None:
    """Equal reported logprobs give KL 0; moving mass away from the reference's top token raises it."""
    ref = PositionLogprobs(entries={1: (math.log(0.7), 1), 2: (math.log(0.2), 2)})
    close = PositionLogprobs(entries={1: (math.log(0.65), 1), 2: (math.log(0.25), 2)})
    far = PositionLogprobs(entries={2: (math.log(0.8), 1), 1: (math.log(0.05), 5)})
    assert position_kl(ref, ref) == 0.0
    assert 0 < position_kl(ref, close) < position_kl(ref, far)


def test_position_kl_is_the_kl_of_the_coarse_partition() -> None:
    """KL = sum over the shared tokens plus one rest bucket: checked against the formula by hand."""
    ref = PositionLogprobs(entries={1: (math.log(0.5), 1), 2: (math.log(0.3), 2), 3: (math.log(0.1), 3)})
    art = PositionLogprobs(entries={1: (math.log(0.4), 1), 2: (math.log(0.4), 2), 4: (math.log(0.1), 3)})
    p, q = [0.5, 0.3, 0.2], [0.4, 0.4, 0.2]  # tokens 1, 2 shared; 3 and 4 fall into each side's rest
    expected = sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))
    assert position_kl(ref, art) == pytest.approx(expected, rel=1e-12)


def test_parse_prompt_logprobs_reads_vllm_shape() -> None:
    """Token ids arrive as JSON object keys (strings); the first position has no logprobs."""
    response = {"choices": [{"prompt_logprobs": [None, {"7": {"logprob": -0.1, "rank": 1, "decoded_token": "a"}}]}]}
    first, second = parse_prompt_logprobs(response)
    assert first is None and second is not None and second.entries == {7: (-0.1, 1)} and second.top1 == 7


def test_reference_generates_once_and_the_quant_scores_the_same_tokens(
    family: Manifest, fake_vllm: FakeVllm, tmp_path: Path
) -> None:
    """The reference's run generates each continuation and scores it; the quant's only scores those token ids."""
    _, report = _run(family, fake_vllm, tmp_path)
    generations = [b for b in fake_vllm.bodies if b.get("return_token_ids")]
    scorings = [b for b in fake_vllm.bodies if b.get("prompt_logprobs") is not None]
    assert len(generations) == 8 and {b["model"] for b in generations} == {REFERENCE}
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 12 for b in generations)
    by_model = {m: [b["prompt"] for b in scorings if b["model"] == m] for m in (REFERENCE, QUANT)}
    assert by_model[REFERENCE] == by_model[QUANT] and len(by_model[QUANT]) == 8
    assert all(b["prompt_logprobs"] == 5 and b["max_tokens"] == 1 for b in scorings)
    rows = {r.artifact_id: r for r in report.rows}
    assert rows["ref"].verdict == "reference" and rows["ref"].value == 0.0
    assert rows["fp8"].verdict == "pass", rows["fp8"].reason
    assert [name for name, _ in rows["fp8"].checks] == ["kl", "flip_rate"]


def test_every_figure_is_recomputed_from_the_raw_responses(
    family: Manifest, fake_vllm: FakeVllm, tmp_path: Path
) -> None:
    """The raw file beside each record gives back every per-prompt figure and every metric exactly."""
    ledger, _ = _run(family, fake_vllm, tmp_path)
    for artifact in ("ref", "fp8"):
        record = _fidelity_record(ledger, artifact)
        ((key, name),) = raw_files(record)
        assert key == "fidelity_raw" and name.endswith(".fidelity.jsonl")
        lines = read_raw(ledger.raw_bytes(record, name))
        if artifact == "ref":
            lines = [{**line, "artifact": line["reference"]} for line in lines]
        figures = figures_from_raw(lines)
        samples = ledger.load_samples(record)
        assert [s.doc_id for s in samples] == [f.doc_id for f in figures]
        for sample, figure in zip(samples, figures, strict=True):
            assert sample.score == figure.kl
            assert sample.model_extra == {"flip_rate": figure.flip_rate, "first_divergence": figure.first_divergence,
                                          "positions": figure.positions}
        assert {k: m.value for k, m in record.metrics.items()} == summarize(figures)
        assert record.extra["value"] == summarize(figures)["kl"]
    assert _fidelity_record(ledger, "fp8").metrics["kl"].value > 0


@pytest.mark.parametrize("fake_vllm", [{QUANT: 3.0}], indirect=True)
def test_a_far_quant_fails_on_kl_and_flips(family: Manifest, fake_vllm: FakeVllm, tmp_path: Path) -> None:
    """Logits nudged hard: large KL, many flips, an early first divergence; the gate fails (exit 4)."""
    _, report = _run(family, fake_vllm, tmp_path)
    row = next(r for r in report.rows if r.artifact_id == "fp8")
    checks = dict(row.checks)
    assert row.verdict == "fail" and "max_kl = 0.05" in row.reason
    assert checks["kl"].artifact_mean > 0.05 and checks["flip_rate"].verdict == "fail"
    assert report.exit_code == 4


def test_a_warm_rerun_measures_nothing(family: Manifest, fake_vllm: FakeVllm, tmp_path: Path) -> None:
    """Both records are found under their input keys: the second run sends no request."""
    _run(family, fake_vllm, tmp_path)
    sent = len(fake_vllm.bodies)
    _, report = _run(family, fake_vllm, tmp_path)
    assert len(fake_vllm.bodies) == sent and {r.origin for r in report.rows} == {"recorded"}


def test_a_quant_alone_serves_the_reference_first_when_its_record_is_missing(
    family: Manifest, fake_vllm: FakeVllm, tmp_path: Path
) -> None:
    """`eval --artifact fp8` (a matrix job) plans the reference's fidelity run first, then none once recorded."""
    ledger = Ledger(family.ledger_dir)
    cache = HashCache(tmp_path / "h.json")
    plan = plan_eval(family, ledger=ledger, hash_cache=cache, gates=["fidelity"], artifacts=["fp8"])
    assert [(s.artifact.id, [g.gate.id for g in s.pending]) for s in plan.servers] == [
        ("ref", ["fidelity"]), ("fp8", ["fidelity"])]
    report = run_eval(plan, ledger=ledger, run_dir=tmp_path / "run", endpoint=fake_vllm.url)
    assert {r.artifact_id: r.verdict for r in report.rows} == {"ref": "reference", "fp8": "pass"}
    again = plan_eval(family, ledger=ledger, hash_cache=cache, gates=["fidelity"], artifacts=["fp8"])
    assert [s.artifact.id for s in again.servers] == ["fp8"] and again.pending == 0


def test_the_quant_without_the_reference_record_is_void(family: Manifest, fake_vllm: FakeVllm, tmp_path: Path) -> None:
    """Attached to a quant's server (`--endpoint`: it serves that artifact alone, so the reference is never
    planned on it) with no reference record at all, the gate is void and says what to run."""
    ledger = Ledger(family.ledger_dir)
    plan = plan_eval(family, ledger=ledger, hash_cache=HashCache(tmp_path / "h.json"), gates=["fidelity"],
                     artifacts=["fp8"], attached=True)
    assert [s.artifact.id for s in plan.servers] == ["fp8"]
    report = run_eval(plan, ledger=ledger, run_dir=tmp_path / "run", endpoint=fake_vllm.url)
    (row,) = report.rows
    assert row.verdict == "void" and "needs the reference's record" in row.reason and report.exit_code == 6


def test_dry_run_prints_the_requests(family: Manifest, tmp_path: Path) -> None:
    """The reference's line shows a continuation request and a scoring request; the quant's a scoring request."""
    plan = plan_eval(family, ledger=Ledger(tmp_path / "r"), hash_cache=HashCache(tmp_path / "h.json"),
                     gates=["fidelity"])
    text = {job.artifact.id: describe_gate(family, job.gates[0], base_url="http://127.0.0.1:<port>",
                                           model=job.artifact.repo, files=model_files(job.artifact, job.model_dir))
            for job in plan.servers}
    assert '"return_token_ids": true' in text["ref"] and '"prompt_logprobs": 5' in text["ref"]
    assert "return_token_ids" not in text["fp8"] and '"prompt_logprobs": 5' in text["fp8"]


def test_fidelity_keys_are_checked_all_at_once(fixture_family: Path) -> None:
    """Every bad fidelity field is reported in one ConfigError (exit 3), each at its own key."""
    (fixture_family / "prompts" / "bad.jsonl").write_text('{"id": "a", "prompt": "x"}\nnot json\n{"id": "a"}\n')
    manifest = fixture_family / "release.toml"
    bad = """
[[gate]]
id = "fid"
fidelity = "prompts/bad.jsonl"
max_tokens = 8
top_k = 50
margin = 0.1
mode = "thinking"
max_flip_rate = 1.5

[[gate]]
id = "fid2"
fidelity = "prompts/missing.jsonl"
max_tokens = 8
"""
    text = manifest.read_text().replace("[[gate]]\nid = \"json\"", "[[gate]]\nid = \"json\"\nmax_kl = 0.1", 1)
    manifest.write_text(text.replace("[[speculative]]", bad + "\n[[speculative]]", 1))
    with pytest.raises(ConfigError) as caught:
        load_manifest(fixture_family)
    where = {p.location for p in caught.value.problems}
    assert caught.value.exit_code == 3
    assert {"gate[2].top_k", "gate[2].margin", "gate[2].mode", "gate[2].max_flip_rate", "gate[2].fidelity:2",
            "gate[2].fidelity:3", "gate[3].max_kl", "gate[3].fidelity", "gate[1].max_kl"} <= where, where


def test_truncation_compared_fails_a_quant_that_loops_more() -> None:
    """Same accuracy, but 30 of 100 answers cut off against the reference's 2: the gate fails on truncation."""
    from hfrelease.manifest.model import Gate

    gate = Gate(id="g", task="t", mode="thinking", max_tokens=64, metric="acc", margin=0.05)
    reference = [Sample(doc_id=str(i), score=1.0, truncated=i < 2, empty=False) for i in range(100)]
    quant = [Sample(doc_id=str(i), score=1.0, truncated=i < 20, empty=10 <= i < 30) for i in range(100)]
    judged = judge_samples(gate, quant, reference)
    assert dict(judged.checks)["accuracy"].verdict == "pass"
    assert judged.verdict == "fail" and "truncation_margin = 0.05" in judged.reason
    assert judge_samples(gate, reference, reference).verdict == "pass"


def test_cards_show_a_fidelity_section_with_every_figure_traced(
    family: Manifest, fake_vllm: FakeVllm, tmp_path: Path
) -> None:
    """The quant's card has a Fidelity table (KL and flips with intervals) and no fidelity row among the deltas."""
    from hfrelease.cards.inputs import read_inputs
    from hfrelease.cards.render import render_family

    _run(family, fake_vllm, tmp_path)
    only = family.model_copy(update={"gate": [g for g in family.gate if g.is_fidelity]})
    only._root = family.root
    rendered = render_family(read_inputs(only), plots=False)
    card = rendered.card("fp8")
    text = card.readme
    section = text[text.index("### Fidelity to the reference"):]
    assert "| Mean KL (CI) |" in section and "| pass |" in section
    assert "Fidelity |" not in text[:text.index("### Fidelity to the reference")].split("## Quality evals")[1]
    kl = next(r for r in card.numbers if r.id == "fidelity.fidelity.fp8.kl")
    record = Ledger(family.ledger_dir).records(artifact_id="fp8", subject_id="fidelity")[0]
    assert float(kl.text) == pytest.approx(record.metrics["kl"].value, abs=5e-5)
    assert "lower bound of the true KL" in section
    from hfrelease.cards.card_text import CardText
    from hfrelease.cards.lint import lint_cards

    cards = [CardText(artifact_id=c.artifact_id, path=family.root / c.artifact_id / "README.md", text=c.readme)
             for c in rendered.cards]
    problems = [p for p in lint_cards(only, cards, inputs=read_inputs(only)) if "Fidelity" in p or "fidelity" in p]
    assert problems == []


def test_ledger_merge_copies_the_raw_responses(family: Manifest, fake_vllm: FakeVllm, tmp_path: Path) -> None:
    """A merged fidelity record brings its raw file, verified against the sha256 in its name."""
    ledger, _ = _run(family, fake_vllm, tmp_path)
    merged = Ledger(tmp_path / "merged")
    merged.merge([ledger.root])
    record = _fidelity_record(merged, "fp8")
    ((_, name),) = raw_files(record)
    assert merged.raw_bytes(record, name) == ledger.raw_bytes(record, name)
    (ledger.root / "fp8" / name).write_bytes(b"{}\n")
    assert Ledger(tmp_path / "again").merge([ledger.root]).skipped_invalid


def test_position_kl_does_not_depend_on_the_order_tokens_arrive_in() -> None:
    """The same logprobs in another key order (a live response vs the sorted raw file) give the same bits."""
    rng = np.random.default_rng(3)
    values = {int(t): (float(v), r + 1) for r, (t, v) in enumerate(zip(rng.permutation(200)[:20],
                                                                        np.sort(rng.normal(-3, 2, 20))[::-1],
                                                                        strict=True))}
    other = {t: (lp - 0.01 * (t % 7), rank) for t, (lp, rank) in values.items()}
    forward = position_kl(PositionLogprobs(entries=values), PositionLogprobs(entries=other))
    backward = position_kl(PositionLogprobs(entries=dict(reversed(values.items()))),
                           PositionLogprobs(entries=dict(sorted(other.items()))))
    assert forward == backward
