"""`hfrelease compare` on the demo's two real releases' ledgers, through the CLI: every number from the records.

OLD is the v0.0 release's ledger (tests/fixtures/ledger_demo_v0.0: the merge job's release-ledger artifact of a
real scripts/demo run at bd4fa2e), NEW the committed demo ledger (model_cards/demo/results, the v0.1 release's
and a superset of its release-ledger). Nothing here names a value: each is read from the record files as JSON
and their raw `vllm bench serve` repeats, so the test holds when model_cards/demo/results is re-recorded.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from hfrelease.speed.noise import t_quantile
from tests.conftest import ROOT, CliRun
from tests.ledger_pairs import median_interval

pytestmark = pytest.mark.unit

OLD = "tests/fixtures/ledger_demo_v0.0"
NEW = "model_cards/demo/results"
# A speed metric of the record and the key and scale of the same figure in one `vllm bench serve` result
# (vLLM reports the acceptance rate in percent; the record keeps a fraction).
BENCH_KEY = {"output_throughput": ("output_throughput", 1.0),
             "spec_acceptance_rate": ("spec_decode_acceptance_rate", 0.01),
             "spec_mean_acceptance_length": ("spec_decode_acceptance_length", 1.0)}
Key = tuple[str, str, str, str]


def _key(record: dict[str, Any]) -> Key:
    """What a record measures, as the README's "Comparing releases" defines a row."""
    if record["kind"] == "gate":
        return ("gate", record["subject_id"], record["mode"], record["artifact_id"])
    extra = record["extra"]
    config = f"{extra.get('speculative', 'none')} c{extra.get('concurrency', 1)} {record['mode']}"
    return ("speed", record["subject_id"], config, record["artifact_id"])


def _newest(ledger: Path) -> dict[Key, tuple[dict[str, Any], Path]]:
    """Per row, the newest "ok" gate or speed record (by start time, then file name), read as plain JSON."""
    found: dict[Key, tuple[str, str, dict[str, Any], Path]] = {}
    for path in ledger.glob("*/*.json"):
        record = json.loads(path.read_text())
        if record["status"] != "ok" or record["kind"] not in ("gate", "speed"):
            continue
        order = (record["started_at"], path.name)
        key = _key(record)
        if key not in found or order > found[key][:2]:
            found[key] = (*order, record, path)
    return {key: (record, path) for key, (_, _, record, path) in found.items()}


def _repeats(record: dict[str, Any], path: Path, metric: str) -> list[float]:
    name, scale = BENCH_KEY[metric]
    values = []
    for raw in record["extra"]["raw"]:
        for line in (path.parent / raw).read_text().splitlines():
            if line.strip() and name in json.loads(line):
                values.append(json.loads(line)[name] * scale)
    return values


def _sessions(ledger: Path) -> dict[tuple[str, str], list[tuple[dict[str, Any], Path]]]:
    """Per (input key, hardware), every ok speed record of the ledger: one measurement's server sessions."""
    found: dict[tuple[str, str], list[tuple[dict[str, Any], Path]]] = {}
    for path in sorted(ledger.glob("*/*.json")):
        record = json.loads(path.read_text())
        if record["status"] == "ok" and record["kind"] in ("speed", "speed-sweep"):
            key = (record["input_key"], json.dumps(record["hardware"], sort_keys=True))
            found.setdefault(key, []).append((record, path))
    return found


def _session_noise(*ledgers: Path) -> tuple[float, int]:
    """README "How speed verdicts decide": ln tok/s of each session, centred on its A/A group's mean, pooled."""
    groups: dict[tuple[str, str], dict[str, float]] = {}
    for ledger in ledgers:
        for key, found in _sessions(ledger).items():
            for record, _ in found:
                value = record["metrics"]["output_throughput"]["value"]
                groups.setdefault(key, {})[record["started_at"] + repr(value)] = math.log(value)
    squares = sum((x - statistics.mean(g.values())) ** 2 for g in groups.values() for x in g.values())
    df = sum(len(g) - 1 for g in groups.values())
    return math.sqrt(squares / df), df


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository's top, so the sides are named as a reader types them."""
    monkeypatch.chdir(ROOT)


def _interval(row: dict[str, Any], old_runs: list[float], new_runs: list[float], noise: tuple[float, int],
              sessions: tuple[int, int]) -> tuple[float | None, float | None]:
    """README "How speed verdicts decide": the repeats' bootstrap interval of the medians and, for output tok/s,
    the session-noise interval around it (their hull)."""
    low = high = None
    if len(old_runs) > 1 and len(new_runs) > 1:
        low, high = median_interval(old_runs, new_runs)
    if row["metric"] == "output_throughput":
        sigma, df = noise
        half = t_quantile(df) * sigma * math.sqrt(1 / sessions[0] + 1 / sessions[1])
        centre = math.log(row["new"] / row["old"])
        s_low, s_high = (row["old"] * math.expm1(centre + sign * half) for sign in (-1, 1))
        low, high = (s_low, s_high) if low is None or high is None else (min(low, s_low), max(high, s_high))
        assert row["method"] == "session-noise"
    return low, high


@pytest.mark.usefixtures("at_root")
def test_no_row_of_the_demos_two_releases_whose_inputs_did_not_change_is_better_or_worse(cli: CliRun) -> None:
    """Issue 24: the reference's own points ran on the same weights, vLLM, prompts and host in both releases
    (147.0 -> 179.7 tok/s on chat was called better): whatever moved between them is the sessions', so each such
    row says "within session noise" with its interval, never better or worse."""
    code, out, err = cli(["compare", OLD, NEW, "--json"])
    assert code == 0, err
    rows = json.loads(out)["rows"]
    unchanged = [r for r in rows if not r["changed"]]
    assert {(r["subject"], r["config"]) for r in unchanged} >= {("chat", "none c1 non-thinking"),
                                                               ("longdoc", "none c1 non-thinking")}
    for row in unchanged:
        assert row["verdict"] == "within session noise" and row["ci_low"] < row["delta"] < row["ci_high"], row


@pytest.mark.usefixtures("at_root")
def test_compare_json_of_the_demos_two_releases_is_recomputed_from_their_records(cli: CliRun) -> None:
    """Each row's values, change, repeats, interval, verdict and changed inputs follow from the two ledgers' files;
    the rows are exactly the measurements both hold and the one-sided rows those only one holds."""
    code, out, err = cli(["compare", OLD, NEW, "--json"])
    assert code == 0, err
    data = json.loads(out)
    old, new = _newest(ROOT / OLD), _newest(ROOT / NEW)
    assert (data["family"], data["old"], data["new"]) == ("demo", OLD, NEW)

    rows = data["rows"]
    assert rows, "the two demo releases share measurements (the reference's speed points, with and without draft)"
    sigma, df = _session_noise(ROOT / OLD, ROOT / NEW)
    assert data["session_noise"]["df"] == df and data["session_noise"]["sigma_log"] == pytest.approx(sigma)
    sessions = {ledger: _sessions(ROOT / ledger) for ledger in (OLD, NEW)}
    keys = {(r["kind"], r["subject"], r["config"], r["artifact"]) for r in rows}
    assert keys == old.keys() & new.keys()
    for row in rows:
        key: Key = (row["kind"], row["subject"], row["config"], row["artifact"])
        (o, _), (n, _) = old[key], new[key]
        # The v0.0 release ran no quality gate, so every shared row is a speed point.
        assert row["kind"] == "speed"
        assert row["metric"] in o["metrics"] and row["metric"] in n["metrics"]
        assert row["draft"] == n["draft_artifact_id"]
        # A key recorded in several sessions is one measurement holding all their repeats (issue 24).
        both = [[pair for pair in sessions[ledger][(r["input_key"], json.dumps(r["hardware"], sort_keys=True))]]
                for ledger, r in ((OLD, o), (NEW, n))]
        assert (row["sessions_old"], row["sessions_new"]) == (len(both[0]), len(both[1]))
        old_runs, new_runs = ([v for record, path in found for v in _repeats(record, path, row["metric"])]
                              for found in both)
        if row["metric"].startswith("spec_") and o["extra"].get("requests") and n["extra"].get("requests"):
            # Both sides keep per-request counters: the interval resamples prompts (its arithmetic is checked on
            # planted prompts in tests/compare/test_acceptance_rows.py); here its size, that it holds the
            # change, and the verdict it gives (the draft's weights changed: no session-noise rule applies).
            assert (row["n_old"], row["n_new"]) == (len(o["extra"]["requests"]), len(n["extra"]["requests"]))
            assert row["changed"] and row["ci_low"] <= row["delta"] <= row["ci_high"]
            low, high = row["ci_low"], row["ci_high"]
            assert row["verdict"] == ("better" if low > 0 else "worse" if high < 0 else "within noise")
            continue
        assert (row["n_old"], row["n_new"]) == (len(old_runs), len(new_runs))
        # A record's value is the median of its repeats (kept to 6 decimals), a measurement's of several sessions
        # the median of all of them: the raw files are what its interval is drawn from.
        assert row["old"] == pytest.approx(statistics.median(old_runs), abs=5.1e-7)
        assert row["new"] == pytest.approx(statistics.median(new_runs), abs=5.1e-7)
        if len(both[1]) == 1:
            assert row["new"] == n["metrics"][row["metric"]]["value"]
        assert row["delta"] == pytest.approx(row["new"] - row["old"], abs=1e-12)
        low, high = _interval(row, old_runs, new_runs, (sigma, df), (len(both[0]), len(both[1])))
        if low is None or high is None:  # one repeat (the context workload): nothing to resample
            assert (row["ci_low"], row["ci_high"], row["method"]) == (None, None, "none")
            expected = "no interval"
        else:
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-9)
            expected = "better" if low > 0 else "worse" if high < 0 else "within noise"
            if not row["changed"] or (expected == "within noise" and row["method"] == "session-noise"):
                expected = "within session noise"
        assert row["verdict"] == expected
        changed = {c["name"]: (c["old"], c["new"]) for c in row["changed"]}
        for name, field in (("weights", "artifact_hash"), ("draft weights", "draft_hash"), ("prompts", "task_hash")):
            differs = o[field] != n[field]
            assert (name in changed) == differs, (key, name)
            if differs:
                assert changed[name] == ((o[field] or "none")[:12], (n[field] or "none")[:12])
        for library in ("vllm", "transformers", "torch"):
            assert (f"{library} version" in changed) == (o["versions"].get(library) != n["versions"].get(library))
        assert ("serve command" in changed) == (o["serve"]["display"] != n["serve"]["display"])
    # The draft was trained longer for v0.1: every row served with it names its weights as the changed input.
    drafted = [r for r in rows if r["draft"] == "draft"]
    assert {r["metric"] for r in drafted} >= {"output_throughput", "spec_acceptance_rate"}
    assert all("draft weights" in [c["name"] for c in r["changed"]] for r in drafted)

    def one_sided(side: str) -> set[Key]:
        return {(r["kind"], r["subject"], r["config"], r["artifact"]) for r in data[f"only_{side}"]}

    assert one_sided("old") == old.keys() - new.keys()
    assert one_sided("new") == new.keys() - old.keys()
    assert {k[0] for k in one_sided("new")} >= {"gate"}  # v0.1's gates, which v0.0 did not run


@pytest.mark.usefixtures("at_root")
def test_compare_markdown_of_the_demos_two_releases_prints_each_rows_numbers(cli: CliRun) -> None:
    """The Markdown section has one table line per compared row, carrying its before, now and change as the JSON
    gives them, and lists every one-sided row."""
    code, out, err = cli(["compare", OLD, NEW, "--json"])
    assert code == 0, err
    data = json.loads(out)
    code, markdown, err = cli(["compare", OLD, NEW, "--markdown"])
    assert code == 0, err
    assert markdown.startswith(f"## Changes since {OLD}\n")
    table = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(table) == len(data["rows"])
    for row, line in zip(data["rows"], table, strict=True):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        # Fractions (acceptance rates) print as points, as the cards print them; everything else with 2 decimals.
        scale, digits = (100, 1) if "acceptance_rate" in row["metric"] else (1, 2)
        assert cells[1] == row["artifact"] and cells[7] == row["verdict"]
        assert cells[3:6] == [f"{scale * row['old']:.{digits}f}", f"{scale * row['new']:.{digits}f}",
                              f"{scale * row['delta']:+.{digits}f}"]
        if row["ci_low"] is not None:
            # Every interval says what it resamples (issue 24): a speed row's repeats, one session each side.
            over = ("between sessions, A/A noise" if row["method"] == "session-noise" else
                    "repeats of one session" if row["kind"] == "speed" else
                    "paired over items" if row["method"] == "paired-bootstrap" else "unpaired over items")
            assert cells[6] == f"{scale * row['ci_low']:+.{digits}f} to {scale * row['ci_high']:+.{digits}f} ({over})"
        else:  # one repeat: "n = 1", never a range of one value
            one = row["kind"] == "speed" and 1 in (row["n_old"], row["n_new"])
            assert cells[6] == ("no interval (n = 1)" if one else "no interval")
    only_new = next(line for line in markdown.splitlines() if line.startswith(f"Only in {NEW}: "))
    assert only_new.count(" of ") == len(data["only_new"])
    assert not data["only_old"] or f"Only in {OLD}: " in markdown
