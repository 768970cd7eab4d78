"""`hfrelease compare` over ledger directories and git refs: every printed number recomputed from the two ledgers."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hfrelease.compare import compare_family, comparison_markdown
from hfrelease.compare.rows import RESAMPLES
from hfrelease.errors import ExitCode, HfreleaseError, LedgerError, UsageError
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.verdicts.comparison import paired_comparison
from tests.conftest import CliRun
from tests.ledger_pairs import gate_record, median_interval, write_ledger, write_speed

pytestmark = pytest.mark.unit

DEMO = Path(__file__).resolve().parents[2] / "model_cards" / "demo"


def _scores(ledger: Path, artifact: str, gate: str) -> dict[str, float]:
    ledger_ = Ledger(ledger)
    record = ledger_.records(artifact_id=artifact, subject_id=gate)[-1]
    return {s.doc_id: s.score for s in ledger_.load_samples(record)}


@pytest.fixture
def two_ledgers(tmp_path: Path) -> tuple[Path, Path]:
    """v1 and v2 of one family: a gate that improves on the same items, a speed point that speeds up."""
    old, new = tmp_path / "old", tmp_path / "new"
    write_ledger(old, gate_record(accuracy=0.5, seed="a"), gate_record(artifact="q1", accuracy=0.7, seed="c"))
    write_ledger(new, gate_record(accuracy=0.95, seed="b", weights="w2", step=1),
                 gate_record(artifact="q1", accuracy=0.7, seed="c"))
    write_speed(Ledger(old), throughputs=(100.0, 104.0, 98.0), acceptances=(0.40, 0.41, 0.39))
    write_speed(Ledger(new), throughputs=(150.0, 149.0, 155.0), acceptances=(0.60, 0.62, 0.61),
                draft_weights="d2", step=1)
    return old, new


def test_every_number_is_reproduced_from_the_two_ledgers(two_ledgers: tuple[Path, Path]) -> None:
    """Values, deltas, paired and unpaired intervals and verdicts equal those recomputed from the records."""
    old, new = two_ledgers
    comparison = compare_family(str(old), str(new), manifest=None)
    rows = {(r.subject, r.artifact, r.metric): r for r in comparison.rows}
    for artifact in ("q0", "q1"):
        row = rows[("arith", artifact, "exact_match,answer")]
        o, n = _scores(old, artifact, "arith"), _scores(new, artifact, "arith")
        expected = paired_comparison(n, o, margin=0.0)
        assert (row.old, row.new) == (statistics.mean(o.values()), statistics.mean(n.values()))
        assert row.delta == pytest.approx(expected.delta)
        assert (row.ci_low, row.ci_high) == (expected.ci_low, expected.ci_high)
        assert row.method == "paired-bootstrap" and row.n_old == row.n_new == 60
    assert rows[("arith", "q0", "exact_match,answer")].verdict == "better"
    assert rows[("arith", "q1", "exact_match,answer")].verdict == "within noise"
    speed = rows[("chat", "ref", "output_throughput")]
    assert (speed.old, speed.new, speed.delta) == (100.0, 150.0, 50.0)
    assert (speed.ci_low, speed.ci_high) == median_interval([100.0, 104.0, 98.0], [150.0, 149.0, 155.0])
    # Neither ledger measured a key in two sessions: the repeats' interval says nothing of what varies between
    # sessions, so the clear difference is not called better (issue 24).
    assert speed.verdict == "session noise unmeasured" and speed.method == "unpaired-bootstrap"
    assert speed.draft == "draft" and comparison.noise is None
    acceptance = rows[("chat", "ref", "spec_acceptance_rate")]
    assert (acceptance.old, acceptance.new) == (0.40, 0.61)
    low, high = median_interval([0.40, 0.41, 0.39], [0.60, 0.62, 0.61])
    assert (acceptance.ci_low, acceptance.ci_high) == (pytest.approx(low), pytest.approx(high))
    changed = {c.name: (c.old, c.new) for c in rows[("arith", "q0", "exact_match,answer")].changed}
    assert list(changed) == ["weights"]
    assert [c.name for c in speed.changed] == ["draft weights"]
    assert rows[("arith", "q1", "exact_match,answer")].changed == ()


def test_markdown_and_json_print_the_same_rows(two_ledgers: tuple[Path, Path], cli: CliRun) -> None:
    """--json carries every row unrounded; --markdown prints them in points and tok/s with their verdicts."""
    old, new = two_ledgers
    code, out, _ = cli(["compare", str(old), str(new), "--json"])
    assert code == 0
    data = json.loads(out)
    comparison = compare_family(str(old), str(new), manifest=None)
    assert [r["delta"] for r in data["rows"]] == [r.delta for r in comparison.rows]
    assert data["only_old"] == data["only_new"] == []
    code, markdown, _ = cli(["compare", str(old), str(new), "--markdown"])
    assert code == 0 and markdown == comparison_markdown(comparison)
    q0 = next(r for r in comparison.rows if r.artifact == "q0")
    assert f"| {100 * q0.old:.1f} | {100 * q0.new:.1f} | {100 * q0.delta:+.1f} |" in markdown
    assert "| 100.00 | 150.00 | +50.00 |" in markdown
    assert "weights" in markdown and "better" in markdown
    code, table, _ = cli(["compare", str(old), str(new)])
    assert code == 0 and "within noise" in table and "+50.00" in table


def test_changed_items_are_compared_unpaired(tmp_path: Path) -> None:
    """A gate whose items changed (task hash, doc ids) gets an unpaired interval, and says the task changed."""
    write_ledger(tmp_path / "a", gate_record(accuracy=0.5))
    write_ledger(tmp_path / "b", gate_record(accuracy=0.5, items="v2", seed="z"))
    (row,) = compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None).rows
    old = list(_scores(tmp_path / "a", "q0", "arith").values())
    new = list(_scores(tmp_path / "b", "q0", "arith").values())
    rng = np.random.default_rng(0)
    a, b = np.array(old), np.array(new)
    old_means = a[rng.integers(0, len(a), size=(RESAMPLES, len(a)))].mean(axis=1)
    new_means = b[rng.integers(0, len(b), size=(RESAMPLES, len(b)))].mean(axis=1)
    low, high = (float(x) for x in np.quantile(new_means - old_means, [0.025, 0.975]))
    assert row.method == "unpaired-bootstrap" and (row.ci_low, row.ci_high) == (low, high)
    assert [c.name for c in row.changed] == ["task"]


def test_changed_inputs_are_listed_per_row(tmp_path: Path) -> None:
    """vLLM version, serve flags and budget changes are named with their old and new values."""
    write_ledger(tmp_path / "a", gate_record(accuracy=0.5))
    write_ledger(tmp_path / "b", gate_record(accuracy=0.5, vllm="0.33.0", flags=("--enforce-eager",), max_tokens=128))
    (row,) = compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None).rows
    changed = {c.name: (c.old, c.new) for c in row.changed}
    assert changed == {"vllm version": ("0.32.0+cpu", "0.33.0"),
                       "serve command": ("vllm serve org/x", "vllm serve org/x --enforce-eager"),
                       "generation.max_tokens": ("64", "128")}
    assert row.verdict == "within noise" and row.delta == 0.0


def test_rows_on_one_side_are_listed(tmp_path: Path, cli: CliRun) -> None:
    """A gate only in the old ledger and an artifact only in the new one are listed, not compared."""
    write_ledger(tmp_path / "a", gate_record(accuracy=0.5), gate_record(gate="mc", accuracy=0.5))
    write_ledger(tmp_path / "b", gate_record(accuracy=0.5), gate_record(artifact="q9", accuracy=0.5))
    comparison = compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None)
    found = [(r.side, r.subject, r.artifact) for r in comparison.one_sided]
    assert found == [("old", "mc", "q0"), ("new", "arith", "q9")]
    code, out, _ = cli(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    data = json.loads(out)
    assert code == 0
    assert [r["subject"] for r in data["only_old"]] == ["mc"] and [r["artifact"] for r in data["only_new"]] == ["q9"]
    assert "Only in" in comparison_markdown(comparison)


def test_lower_is_better_reads_the_interval_the_other_way(tmp_path: Path) -> None:
    """A KL that rises is worse, though its delta is positive."""
    write_ledger(tmp_path / "a", gate_record(accuracy=0.1, metric="mean_kl"))
    write_ledger(tmp_path / "b", gate_record(accuracy=0.9, seed="q", metric="mean_kl"))
    (row,) = compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None).rows
    assert row.delta > 0 and not row.higher_is_better and row.verdict == "worse"


def test_missing_or_edited_raw_repeats_are_refused(tmp_path: Path, cli: CliRun) -> None:
    """Issue 24: a speed record whose raw `*.bench.jsonl` repeats are gone or edited (no longer the sha256 in
    their names) is refused with exit 6, every such file named at once, never judged by its value alone."""
    write_speed(write_ledger(tmp_path / "a"), throughputs=(100.0, 101.0, 99.0), raw=False)
    write_speed(write_ledger(tmp_path / "b"), throughputs=(120.0, 121.0, 119.0), draft_weights="d2")
    error = _fail(str(tmp_path / "a"), str(tmp_path / "b"))
    assert isinstance(error, LedgerError) and "3 raw files" in error.message
    assert error.message.count("(missing)") == 3 and str(tmp_path / "a") in error.message
    edited = tmp_path / "edited"
    shutil.copytree(tmp_path / "b", edited)
    bench = sorted(edited.glob("ref/*.bench.jsonl"))
    bench[0].write_text('{"output_throughput": 190.0, "completed": 8}\n')
    bench[1].unlink()
    error = _fail(str(tmp_path / "b"), str(edited))
    assert f"ref/{bench[0].name} (does not match the sha256 in its name)" in error.message
    assert f"ref/{bench[1].name} (missing)" in error.message and "2 raw files" in error.message
    code, out, err = cli(["compare", str(tmp_path / "b"), str(edited), "--json"])
    assert code == ExitCode.MEASUREMENT_FAILED and "(missing)" in err
    assert '"rows"' not in out


def test_every_interval_says_what_it_resamples(two_ledgers: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue 24: each printed interval names its resampling unit (a gate's items, paired or not; a speed row's
    repeats, each side's from one server session), and a speed record of one repeat says "n = 1", never a range."""
    from hfrelease.compare.report import format_interval

    old, new = two_ledgers
    comparison = compare_family(str(old), str(new), manifest=None)
    rows = {(r.subject, r.artifact, r.metric): r for r in comparison.rows}
    assert format_interval(rows[("arith", "q0", "exact_match,answer")]).endswith(" (paired over items)")
    for metric in ("output_throughput", "spec_acceptance_rate"):
        assert format_interval(rows[("chat", "ref", metric)]).endswith(" (repeats of one session)")
    markdown = comparison_markdown(comparison)
    assert "(paired over items) | better |" in markdown
    assert "(repeats of one session) | session noise unmeasured |" in markdown
    write_speed(write_ledger(tmp_path / "a"), throughputs=(100.0,))
    write_speed(write_ledger(tmp_path / "b"), throughputs=(120.0,), draft_weights="d2")
    (row,) = [r for r in compare_family(str(tmp_path / "a"), str(tmp_path / "b"), manifest=None).rows
              if r.metric == "output_throughput"]
    assert format_interval(row) == "no interval (n = 1)" and row.verdict == "no interval"


def _fail(old: str, new: str, manifest: Manifest | None = None) -> HfreleaseError:
    with pytest.raises(HfreleaseError) as info:
        compare_family(old, new, manifest=manifest)
    return info.value


def test_bad_sides_are_refused_with_their_exit_codes(tmp_path: Path, cli: CliRun) -> None:
    """Two families, an empty directory, a damaged record, no manifest for a tag: exit 2, or 6 for damage."""
    write_ledger(tmp_path / "a", gate_record(accuracy=0.5))
    write_ledger(tmp_path / "other", gate_record(family="other", accuracy=0.5))
    error = _fail(str(tmp_path / "a"), str(tmp_path / "other"))
    assert isinstance(error, UsageError) and "family 'fam'" in error.message and "'other'" in error.message
    (tmp_path / "empty").mkdir()
    assert "not a ledger" in _fail(str(tmp_path / "a"), str(tmp_path / "empty")).message
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "a", damaged)
    record = next(damaged.glob("q0/*.json"))
    record.write_text(record.read_text().replace('"n": 60', '"n": 61'))
    assert isinstance(_fail(str(tmp_path / "a"), str(damaged)), LedgerError)
    assert "no manifest" in _fail(str(tmp_path / "a"), "v9.9").message
    code, _, err = cli(["compare", str(tmp_path / "a"), str(tmp_path / "other")])
    assert code == ExitCode.USAGE and "only two ledgers of one family compare" in err
    code, _, err = cli(["compare", str(tmp_path / "a"), str(damaged)])
    assert code == ExitCode.MEASUREMENT_FAILED


def test_links_and_special_files_are_refused_before_reading(tmp_path: Path) -> None:
    """A record linked from outside, a FIFO and a linked artifact directory are refused, nothing hangs."""
    write_ledger(tmp_path / "a", gate_record(accuracy=0.5))
    outside = tmp_path / "outside"
    write_ledger(outside, gate_record(accuracy=0.9))
    linked = tmp_path / "linked"
    (linked / "q0").mkdir(parents=True)
    target = next(outside.glob("q0/*.json"))
    (linked / "q0" / target.name).symlink_to(target)
    assert "link or special file" in _fail(str(tmp_path / "a"), str(linked)).message
    fifo = tmp_path / "fifo"
    (fifo / "q0").mkdir(parents=True)
    os.mkfifo(fifo / "q0" / "gate-arith-000000000000-000000000000.json")
    assert "link or special file" in _fail(str(tmp_path / "a"), str(fifo)).message
    dir_link = tmp_path / "dirlink"
    dir_link.mkdir()
    (dir_link / "q0").symlink_to(outside / "q0")
    assert "link or special file" in _fail(str(tmp_path / "a"), str(dir_link)).message


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True, timeout=60)


@pytest.mark.allow_subprocess
def test_git_refs_are_read_without_touching_the_work_tree(tmp_path: Path, cli: CliRun) -> None:
    """git:v1 against git:HEAD reads each commit's results/; bad refs are exit 2 and option-like refs are refused."""
    repo = tmp_path / "repo"
    family = repo / "model_cards" / "fam"
    family.mkdir(parents=True)
    text = (DEMO / "release.toml").read_text().replace('name = "demo"', 'name = "fam"', 1)
    (family / "release.toml").write_text(text)
    _git(repo, "init", "-q")
    write_ledger(family / "results", gate_record(accuracy=0.5))
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "v1")
    _git(repo, "tag", "v1")
    shutil.rmtree(family / "results")
    write_ledger(family / "results", gate_record(accuracy=0.95, seed="b", weights="w2", step=1))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "v2")
    shutil.rmtree(family / "results")  # the work tree's ledger is gone: only the commits hold it
    manifest = load_manifest(family, check_files=False)
    comparison = compare_family("git:v1", "git:HEAD", manifest=manifest)
    (row,) = comparison.rows
    assert (row.old, row.new) == (gate_record(accuracy=0.5).metrics["exact_match,answer"].value,
                                  gate_record(accuracy=0.95, seed="b").metrics["exact_match,answer"].value)
    assert row.verdict == "better" and [c.name for c in row.changed] == ["weights"]
    assert not (family / "results").exists()
    for ref in ("nope", "--output=/tmp/x", "v1 v2"):
        with pytest.raises(UsageError):
            compare_family(f"git:{ref}", "git:HEAD", manifest=manifest)
    code, _, err = cli(["compare", "git:nope", "git:HEAD", "--manifest", str(family)])
    assert code == ExitCode.USAGE and "no such commit" in err
    _git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    _git(repo, "rm", "-rq", "--cached", "model_cards/fam/results")
    _git(repo, "commit", "-qm", "no ledger")
    assert "not a ledger" in _fail("git:HEAD", "git:v1", manifest=manifest).message
