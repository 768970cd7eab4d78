"""The gate of a head an artifact ships itself (native MTP): each artifact's acceptance against the reference's.

Unit tests over speed rows and manifests; the slow test serving a real MTP model and a quant that lost its MTP
layer is tests/demo/test_mtp.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hfrelease.errors import ConfigError
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.manifest.model import Speculative
from hfrelease.serving.command import ServeCommand
from hfrelease.speed.acceptance import RATE
from hfrelease.speed.plan import point_input_key
from hfrelease.speed.result import SpeedRow
from hfrelease.speed.verdict import own_head_checks

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SHARE = 0.5


@pytest.fixture(scope="module")
def demo() -> Manifest:
    """The demo manifest with a native-MTP config gated at half the reference's acceptance."""
    manifest = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    mtp = Speculative(id="own-mtp", method="mtp", num_speculative_tokens=1, min_acceptance_vs_reference=SHARE)
    return manifest.model_copy(update={"speculative": [*manifest.speculative, mtp]})


def _row(artifact: str, acceptance: float | None, interval: tuple[float, float] | None = None, *,
         spec: str = "own-mtp", workload: str = "chat", concurrency: int = 1) -> SpeedRow:
    metrics: dict[str, Any] = {"output_throughput": 50.0}
    if acceptance is not None:
        metrics[RATE] = acceptance
    return SpeedRow(artifact_id=artifact, workload_id=workload, speculative=spec, concurrency=concurrency,
                    draft_id=None, origin="measured", status="ok", metrics=metrics,
                    acceptance_intervals={RATE: list(interval)} if interval else {})


def test_a_quant_that_lost_its_mtp_layer_fails_against_the_reference(demo: Manifest) -> None:
    """The reference accepts 0.80 of its own MTP drafts, the quant none: 0 < 0.5 x 0.80, and the reason says both."""
    checks = own_head_checks(demo, [_row("reference", 0.8, (0.7, 0.9)), _row("fp8-dynamic", 0.0, (0.0, 0.0))])
    assert [(c.draft_id, c.check, c.verdict) for c in checks] == [("fp8-dynamic", "acceptance-vs-reference", "fail")]
    check = checks[0]
    assert check.threshold == pytest.approx(0.4) and check.judged == 0.0 and check.judged_over == "prompts"
    assert "0.400 (0.5 x the reference's 0.800 (95 % over prompts 0.700-0.900))" in check.reason
    assert "its lower bound <" in check.reason


def test_a_quant_keeping_its_head_passes_on_the_lower_bound_of_its_interval(demo: Manifest) -> None:
    """0.75 (0.60-0.85) against 0.5 x 0.80: its lower bound 0.60 >= 0.40, a pass."""
    checks = own_head_checks(demo, [_row("reference", 0.8, (0.7, 0.9)), _row("fp8-dynamic", 0.75, (0.6, 0.85))])
    assert [c.verdict for c in checks] == ["pass"]
    assert checks[0].judged == 0.6


def test_the_interval_not_the_point_decides(demo: Manifest) -> None:
    """A point of 0.45 over 0.40 whose interval reaches down to 0.30 fails: the prompts do not show it holds."""
    checks = own_head_checks(demo, [_row("reference", 0.8, (0.7, 0.9)), _row("w8a8-int8", 0.45, (0.30, 0.6))])
    assert [c.verdict for c in checks] == ["fail"]


def test_without_the_reference_measured_there_is_nothing_to_compare_with(demo: Manifest) -> None:
    """The quant's point alone (or the reference's on another workload) fails, saying what to measure."""
    checks = own_head_checks(demo, [_row("reference", 0.8, (0.7, 0.9), workload="longdoc"),
                                    _row("fp8-dynamic", 0.8, (0.7, 0.9))])
    assert [c.verdict for c in checks] == ["fail"]
    assert "was not measured" in checks[0].reason and checks[0].threshold is None


def test_only_gated_configs_at_batch_1_are_judged_and_never_the_reference(demo: Manifest) -> None:
    """ngram has no such gate; a concurrency-4 point is not the gate's; the reference is what others meet."""
    rows = [_row("reference", 0.8, (0.7, 0.9)), _row("fp8-dynamic", 0.0, spec="ngram"),
            _row("fp8-dynamic", 0.0, concurrency=4), _row("reference", 0.8, concurrency=4)]
    assert own_head_checks(demo, rows) == []


def test_a_point_with_one_value_is_judged_on_it_and_says_so(demo: Manifest) -> None:
    """An older record without per-request outcomes: its value against the bound, named as one value."""
    checks = own_head_checks(demo, [_row("reference", 0.8), _row("fp8-dynamic", 0.5)])
    assert [c.verdict for c in checks] == ["pass"]
    assert "one value" in checks[0].reason


def test_the_threshold_stays_out_of_the_points_keys(demo: Manifest) -> None:
    """Changing the gate re-judges recorded points and never re-measures them."""
    workload = demo.workload[0]
    plain = Speculative(id="own-mtp", method="mtp", num_speculative_tokens=1)
    gated = plain.model_copy(update={"min_acceptance_vs_reference": 0.9})
    keys = {point_input_key(workload, concurrency=1, prompts_sha256="p", content_sha256="c", draft_sha256=None,
                            speculative=spec, public=ServeCommand(argv=("vllm", "serve"), served_model_name="m"),
                            vllm_version="0.32.0")
            for spec in (plain, gated)}
    assert len(keys) == 1


def _family(tmp_path: Path, *, share: str = "0.5", draft: str = "", artifacts: str = '["reference", "fp8-dynamic"]'
            ) -> Path:
    """The demo manifest with a native-MTP config and a workload listing it appended."""
    text = (ROOT / "model_cards" / "demo" / "release.toml").read_text(encoding="utf-8")
    (tmp_path / "release.toml").write_text(text + f"""
[[speculative]]
id = "own-mtp"
method = "mtp"
num_speculative_tokens = 1
min_acceptance_vs_reference = {share}
{draft}

[[workload]]
id = "mtp-chat"
prompts = "prompts/chat.jsonl"
output_len = 16
speculative = ["none", "own-mtp"]
artifacts = {artifacts}
""", encoding="utf-8")
    return tmp_path


def _problems(tmp_path: Path, **fields: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_manifest(_family(tmp_path, **fields), check_files=False)
    return [f"{p.location}: {p.message}" for p in caught.value.problems]


def test_the_manifest_takes_the_gate_on_a_draftless_config(tmp_path: Path) -> None:
    manifest = load_manifest(_family(tmp_path), check_files=False)
    assert [s.min_acceptance_vs_reference for s in manifest.speculative if s.id == "own-mtp"] == [0.5]


@pytest.mark.parametrize(("fields", "expected"), [
    ({"share": "0"}, "min_acceptance_vs_reference"),
    ({"share": "1.5"}, "min_acceptance_vs_reference"),
    ({"artifacts": '["fp8-dynamic"]'}, "not measured on the reference 'reference'"),
])
def test_a_bad_gate_is_named(tmp_path: Path, fields: dict[str, str], expected: str) -> None:
    """Out of (0, 1], or listed by a workload the reference is not measured on: a config problem naming it."""
    assert any(expected in p for p in _problems(tmp_path, **fields))


def test_a_draft_config_cannot_carry_it(tmp_path: Path) -> None:
    """A draft artifact's gates are its own table's: the config refuses the field, with every other problem."""
    problems = _problems(tmp_path, draft='draft = "draft"', artifacts='["fp8-dynamic"]')
    assert any("min_acceptance_vs_reference gates a head the artifact ships itself" in p for p in problems)
    assert any("not measured on the reference" in p for p in problems)


def _requests(counts: list[tuple[int, int]]) -> tuple[dict[str, Any], ...]:
    """Per-request summaries (accepted, drafted), one verify step a draft token (num_speculative_tokens 1)."""
    return tuple({"output_tokens": d, "output_sha": "0" * 16, "steps": d, "accepted": a, "drafted": d,
                  "accepted_per_pos": [a], "drafted_per_pos": [d]} for a, d in counts)


def _paired(artifact: str, counts: list[tuple[int, int]], prompts: str = "p" * 64) -> SpeedRow:
    requests = _requests(counts)
    rate = sum(a for a, _ in counts) / sum(d for _, d in counts)
    row = _row(artifact, rate, (0.0, 1.0))  # its own interval, which the paired verdict does not use
    return SpeedRow(**{**row.__dict__, "requests": requests, "prompts_sha256": prompts})


def test_with_per_request_counters_on_the_same_prompts_the_gate_pairs_them() -> None:
    """Both points keep each prompt's counters: the verdict is the difference (quant - share x reference)
    resampled over the same prompts in pairs, its lower bound against 0. A quant at 0.9 of a reference at 0.8 on
    8 prompts passes; one whose acceptance halved on exactly the prompts the reference found hard, while the
    reference's own spread over prompts is wide, is judged with that spread, and one that accepts nothing fails."""
    demo = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    mtp = Speculative(id="own-mtp", method="mtp", num_speculative_tokens=1, min_acceptance_vs_reference=0.9)
    demo = demo.model_copy(update={"speculative": [*demo.speculative, mtp]})
    reference = _paired("reference", [(8, 10)] * 8)
    kept = own_head_checks(demo, [reference, _paired("fp8-dynamic", [(9, 10)] * 8)])
    assert [c.verdict for c in kept] == ["pass"]
    check = kept[0]
    assert check.threshold == pytest.approx(0.72) and check.judged_over == "prompts"
    assert check.judged is not None and check.judged == pytest.approx(0.72 + 0.18)  # no spread: 0.9 - 0.72
    assert "on the same 8 prompts" in check.reason and "resampled in pairs" in check.reason
    lost = own_head_checks(demo, [reference, _paired("fp8-dynamic", [(0, 10)] * 8)])
    assert [c.verdict for c in lost] == ["fail"] and "its lower bound < 0" in lost[0].reason
    # The quant's own interval (0.0-1.0 here) would pass a floor of 0.72 on no prompt: the paired verdict ignores
    # it and judges the difference, where each prompt's difficulty cancels.
    spread = [(10, 10), (2, 10)] * 4  # the reference: 0.6, half its prompts easy, half hard
    same = own_head_checks(demo, [_paired("reference", spread), _paired("fp8-dynamic", spread)])
    assert [c.verdict for c in same] == ["pass"]  # the same acceptance on every prompt: 1 - 0.9 of it >= 0


def test_points_over_other_prompts_are_not_paired() -> None:
    """Another prompt file, or another number of requests, cannot be paired: the gate falls back to the
    artifact's own interval against the share of the reference's rate, and says so by its reason."""
    demo = load_manifest(ROOT / "model_cards" / "demo", check_files=False)
    mtp = Speculative(id="own-mtp", method="mtp", num_speculative_tokens=1, min_acceptance_vs_reference=0.5)
    demo = demo.model_copy(update={"speculative": [*demo.speculative, mtp]})
    reference = _paired("reference", [(8, 10)] * 8)
    for quant in (_paired("fp8-dynamic", [(9, 10)] * 8, prompts="q" * 64), _paired("fp8-dynamic", [(9, 10)] * 7)):
        (check,) = own_head_checks(demo, [reference, quant])
        assert "resampled in pairs" not in check.reason and "its lower bound" in check.reason
