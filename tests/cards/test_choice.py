"""The choice table ranks by what a reader gets and calls an artifact dominated when another published one
is at least as good on every column, differences within noise (overlapping repeats, sizes under 1 % apart)
counting as equal (issue 25, part 1): unit tests on planted figures, then the committed demo cards."""

from __future__ import annotations

import re

import pytest

from hfrelease.cards import CardInputs
from hfrelease.cards.choice import FAILS, ORIGINAL, PASSES, Facts, best_of, compare_speed, dominated_by, rank_key
from tests.conftest import ROOT

DEMO = ROOT / "model_cards" / "demo"
MIB = 1024 * 1024


def _facts(artifact_id: str, *, quality: int | None = PASSES, tps: tuple[float, float, float] | None = (50, 45, 55),
           memory: float | None = 2.2 * MIB, size: float | None = 1.2 * MIB, published: bool = True) -> Facts:
    return Facts(artifact_id=artifact_id, published=published, quality=quality, tps=tps, memory=memory, size=size)


def test_overlapping_repeats_are_equal_speed() -> None:
    assert compare_speed((35.7, 35.3, 41.5), (38.0, 36.0, 44.0)) == 0
    assert compare_speed((51.5, 43.1, 52.6), (35.7, 35.3, 41.5)) == 1
    assert compare_speed((35.7, 35.3, 41.5), (51.5, 43.1, 52.6)) == -1


def test_the_demo_quants_144_bytes_apart_are_one_size_and_the_faster_dominates() -> None:
    """The demo's W8A8 and FP8 weights differ by 144 bytes of 1.2 MiB: equal, so speed decides."""
    fp8 = _facts("fp8", tps=(35.7, 35.3, 41.5), size=1.18 * MIB + 144, memory=2.18 * MIB)
    w8a8 = _facts("w8a8", tps=(51.5, 43.1, 52.6), size=1.18 * MIB, memory=2.17 * MIB)
    reference = _facts("ref", quality=ORIGINAL, tps=(61.2, 59.9, 61.8), size=1.91 * MIB, memory=2.91 * MIB)
    family = [fp8, w8a8, reference]
    assert dominated_by(fp8, family) == w8a8
    assert dominated_by(w8a8, family) is None
    assert dominated_by(reference, family) is None  # the original weights: no quant beats them on quality
    assert best_of(w8a8, [w8a8, reference]) == ["smallest"]


def test_a_size_difference_over_one_percent_counts() -> None:
    smaller = _facts("a", size=1.0 * MIB, memory=2.0 * MIB)
    larger = _facts("b", size=1.05 * MIB, memory=2.1 * MIB)
    assert dominated_by(larger, [smaller, larger]) == smaller
    assert dominated_by(smaller, [smaller, larger]) is None


@pytest.mark.parametrize("dominator", [
    _facts("x", quality=FAILS, tps=(90, 88, 92)),  # fails a gate: never the one to choose instead
    _facts("x", published=False, tps=(90, 88, 92)),  # not published: a reader cannot download it
    _facts("x", quality=None, tps=(90, 88, 92)),  # not judged: unknown is not "at least as good"
    _facts("x", tps=None),  # speed not measured
])
def test_no_domination_by_a_failing_unpublished_or_unmeasured_artifact(dominator: Facts) -> None:
    assert dominated_by(_facts("a"), [dominator]) is None


def test_rank_puts_what_a_reader_should_take_first() -> None:
    rows = {"fails": _facts("fails", quality=FAILS, tps=(99, 98, 100)), "slow": _facts("slow", tps=(20, 19, 21)),
            "fast": _facts("fast", tps=(60, 59, 61)), "ref": _facts("ref", quality=ORIGINAL, tps=(40, 39, 41)),
            "beaten": _facts("beaten", tps=(90, 89, 91))}
    order = sorted(rows, key=lambda k: rank_key(rows[k], dominated=k == "beaten"))
    assert order == ["fast", "ref", "slow", "beaten", "fails"]  # passing but dominated before failing


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("card", ["reference", "fp8-dynamic", "w8a8-int8", "undertrained", "draft"])
def test_the_committed_demo_cards_open_with_two_sentences_then_the_choice(card: str) -> None:
    """Right after the title: one measured paragraph of two sentences, the hand summary, then the table."""
    text = (DEMO / card / "README.md").read_text(encoding="utf-8").split("\n---\n", 1)[1]
    headings = re.findall(r"^## .*$", text, flags=re.M)
    assert headings[0] in ("## Which artifact should I choose?", "## The family"), headings[:3]
    opening = text.split("<!-- measured:begin -->\n", 1)[1].split("<!-- measured:end -->", 1)[0].strip()
    assert text.index(opening) < text.index(headings[0])
    assert "\n" not in opening and len(re.findall(r"[.!?](?:\s|$)", re.sub(r"\d\.\d", "", opening))) == 2, opening


def test_the_committed_demo_cards_rank_and_advise() -> None:
    """The committed cards (rendered since v0.0: both ledgers' unchanged points pool the host's session noise):
    every artifact has its row, passing ones ranked by batch-1 speed before the drafts; NVFP4's speed is
    emulated, never ranked, and it is the smallest that passes; the EAGLE-3 head is chosen for the workload it
    wins (thinking chat); an artifact called dominated has its opening say to choose the other instead. On the
    recorded host (an Intel Xeon with AMX, its FP8 quant served through torch's own FP8 matmul at 0.3x the
    reference's speed) the int8 quant is as good on every column, so the FP8 quant is dominated there; on an AMD
    EPYC, where the reference served Short chat fastest, no quant was (the rule itself: the unit tests above)."""
    text = (DEMO / "fp8-dynamic" / "README.md").read_text(encoding="utf-8")
    table = _section(text, "## Which artifact should I choose?").split("<!-- measured:end -->")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    names = [re.search(r"\[([^\]]+)\]", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert sorted(names) == ["tiny-EAGLE3", "tiny-FP8-Dynamic", "tiny-NVFP4", "tiny-W8A8-int8", "tiny-draft",
                             "tiny-reference"]
    assert names[-2:] == ["tiny-draft", "tiny-EAGLE3"]
    row = dict(zip(names, rows, strict=True))
    assert row["tiny-reference"].endswith("| the original weights |")
    assert row["tiny-NVFP4"].endswith("| smallest that passes |") and "| emulated |" in row["tiny-NVFP4"]
    assert row["tiny-EAGLE3"].endswith("| Thinking chat |")
    assert row["tiny-draft"].endswith("| no clear win yet |")
    opening = text.split("<!-- measured:begin -->\n", 1)[1].split("<!-- measured:end -->", 1)[0]
    dominated = re.search(r"\| dominated by ([\w-]+) \|$", row["tiny-FP8-Dynamic"])
    assert ("is at least as good on every column of the table below, so choose it instead" in opening) == bool(
        dominated)
    assert re.search(r"the reference's 1\.91 MiB; .* \d\.\d\d\u00d7 \(\d\.\d\d\u2013\d\.\d\d between sessions\) the "
                     r"reference's\.", opening), opening
    assert "1.18 MiB of weights against the reference's 1.91 MiB" in opening
    assert re.search(r"\d+\.\d \(\d+\.\d\u2013\d+\.\d\).* batch-1 output tok/s on Short chat", opening)
    assert re.search(r"worst quality delta is [+-]\d\.\d points \(CI [+-]\d\.\d to [+-]\d\.\d, n=\d+\)", opening)


def test_speed_within_session_noise_is_equal_speed() -> None:
    """With the host's session noise measured, two tok/s figures are equal when the 95 % interval of their ratio
    between sessions holds 1: the demo's 15 % noise per session (df 4) makes 100 and 130 tok/s one speed although
    their repeats do not overlap; a 1 % noise (df 10) tells them apart."""
    from hfrelease.speed.noise import SessionNoise

    fast, slow = (130.0, 128.0, 132.0), (100.0, 99.0, 101.0)
    assert compare_speed(fast, slow) == 1  # repeats alone: apart
    demo = SessionNoise(sigma=0.146, df=4, groups=("a", "b"))
    assert compare_speed(fast, slow, demo) == 0
    assert compare_speed(fast, slow, SessionNoise(sigma=0.01, df=10, groups=("a",))) == 1
    a, b = _facts("a", tps=fast), _facts("b", tps=slow)
    assert dominated_by(b, [a, b]) == a
    assert dominated_by(b, [a, b], demo) is None  # equal on every column: nobody dominates
    assert best_of(b, [a, b], demo) == ["fastest", "smallest"]


def test_a_draft_never_served_on_the_main_workload_shows_where_it_was_measured(demo_inputs: CardInputs) -> None:
    """The demo's EAGLE-3 head is served only on its FP8 verifier's workloads, never on Short chat (the table's
    workload): its batch-1 cell is its target's tok/s with it on the workload it wins (Thinking chat), read from
    that record, marked, and named under the table; the draft model, served on Short chat, keeps its own cell."""
    from hfrelease.cards import render_family
    from hfrelease.cards.choose_table import ELSEWHERE_MARK

    family = render_family(demo_inputs, plots=False)
    card = next(c for c in family.cards if c.artifact_id == "reference")
    text = card.files["README.md"].decode()
    table = _section(text, "## Which artifact should I choose?")
    row = next(line for line in table.splitlines() if line.startswith("| [tiny-EAGLE3]"))
    (point,) = [e.record for e in demo_inputs.records
                if e.record.kind == "speed" and e.record.subject_id == "verifier-think"
                and e.record.draft_artifact_id == "eagle3" and e.record.extra.get("concurrency") == 1]
    low, high = point.extra["spread"]["output_throughput"]  # type: ignore[index]
    cell = row.split(" | ")[2]
    assert cell.startswith(f"{point.metrics['output_throughput'].value:.1f} ({low:.1f}\u2013{high:.1f})"), cell
    assert cell.endswith(ELSEWHERE_MARK)
    assert f"{ELSEWHERE_MARK} not served on Short chat; measured with its target on Thinking chat (tiny-EAGLE3)." \
        in table
    draft_row = next(line for line in table.splitlines() if line.startswith("| [tiny-draft]"))
    assert ELSEWHERE_MARK not in draft_row
