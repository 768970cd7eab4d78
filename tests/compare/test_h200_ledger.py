"""The demo family's H200 ledger (model_cards/demo/results-h200: `hfrelease eval --speed` with vLLM 0.26.0 on the
image's torch 2.11.0+cu130, issue 30) is a ledger `hfrelease compare` reads beside the CPU one: every row's new side
is an H200 record of that vLLM, read back from the files."""

from __future__ import annotations

import json

import pytest

from tests.compare.test_demo_ledgers import _newest
from tests.conftest import ROOT, CliRun

pytestmark = pytest.mark.unit

CPU = "model_cards/demo/results"
H200 = "model_cards/demo/results-h200"


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_every_h200_record_names_the_gpu_and_the_carried_vllm() -> None:
    records = [json.loads(p.read_text()) for p in (ROOT / H200).glob("*/*.json")]
    assert {r["artifact_id"] for r in records} == {"reference", "fp8-dynamic", "w8a8-int8", "undertrained"}
    for record in records:
        assert record["hardware"]["gpus"] == [{"driver": "580.159.04", "name": "NVIDIA H200"}]
        assert (record["versions"]["vllm"], record["versions"]["torch"]) == ("0.26.0", "2.11.0")
        assert record["versions"]["lock"] == "vllm-0.26.0-cu130.txt"


def test_every_quant_has_a_fidelity_result_on_the_h200() -> None:
    """The second run judged fp8-dynamic's fidelity against the reference's record (void in the first: its
    identity was looked up on a Hub the H200 cannot reach) and served w8a8-int8: a measured KL under the bound."""
    for artifact in ("fp8-dynamic", "w8a8-int8"):
        records = [json.loads(p.read_text()) for p in (ROOT / H200 / artifact).glob("gate-fidelity-*.json")]
        ok = [r for r in records if r["status"] == "ok"]
        assert ok, artifact
        assert max(ok, key=lambda r: r["started_at"])["metrics"]["kl"]["value"] < 0.05


def _per_seed(key: tuple[str, str, str, str]) -> list[dict[str, object]]:
    """The newest ok record of each seed of a gate row (empty for a speed row)."""
    kind, subject, mode, artifact = key
    if kind != "gate":
        return []
    newest: dict[int, dict[str, object]] = {}
    for path in sorted((ROOT / H200 / artifact).glob(f"gate-{subject}-*.json")):
        record = json.loads(path.read_text())
        if record["subject_id"] == subject and record["mode"] == mode and record["status"] == "ok":
            seed = record["seed"]
            if seed not in newest or record["started_at"] > newest[seed]["started_at"]:
                newest[seed] = record
    return list(newest.values())


@pytest.mark.usefixtures("at_root")
def test_compare_reads_the_h200_ledger_beside_the_cpu_one(cli: CliRun) -> None:
    code, out, err = cli(["compare", CPU, H200, "--json"])
    assert code == 0, err
    data = json.loads(out)
    cpu, h200 = _newest(ROOT / CPU), _newest(ROOT / H200)
    rows = data["rows"]
    assert {(r["kind"], r["subject"], r["config"], r["artifact"]) for r in rows} == cpu.keys() & h200.keys()
    assert {r["kind"] for r in rows} == {"gate", "speed"}
    for row in rows:
        key = (row["kind"], row["subject"], row["config"], row["artifact"])
        record, _ = h200[key]
        per_seed = _per_seed(key)  # a gate sampled once per seed is the mean over its seeds
        expected = sum(r["metrics"][row["metric"]]["value"] for r in per_seed) / len(per_seed) if per_seed else (
            record["metrics"][row["metric"]]["value"])
        assert row["new"] == pytest.approx(expected, abs=1e-12)
        changed = {c["name"]: (c["old"], c["new"]) for c in row["changed"]}
        assert changed["vllm version"] == ("0.32.0+cpu", "0.26.0")
