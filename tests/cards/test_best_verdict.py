"""Issue 24, part 3 on the cards: "best" holds on every measured point of a workload, one verdict per
(workload, config) on every card, and the draft x target matrix recommends nothing slower than the
reference served alone. Each test plants the losing point in an otherwise unchanged ledger."""

from __future__ import annotations

from dataclasses import replace

from card_fixtures import best_config

from hfrelease.cards import CardInputs, entry_for, lint_cards, render_family
from hfrelease.cards.card_text import CardText
from hfrelease.ledger.record import Metric

TIMES, DASH = "\u00d7", "\u2013"


def _edit(inputs: CardInputs, match: dict[str, object], change: dict[str, object]) -> CardInputs:
    """The same ledger with the speed records whose kind, artifact, workload and extra match `match` changed:
    `change["throughput"]` the median output tok/s (its spread scaled with it), `change["extra"]` merged."""
    entries, found = [], 0
    for entry in inputs.records:
        record = entry.record
        extra = record.extra
        if (record.kind == match.get("kind", record.kind) and record.artifact_id == match["artifact"]
                and record.subject_id == match["workload"]
                and all(extra.get(k) == v for k, v in match.items() if k not in {"kind", "artifact", "workload"})):
            found += 1
            updated = dict(change.get("extra", {}))
            metrics = dict(record.metrics)
            if "throughput" in change:
                value = float(change["throughput"])  # type: ignore[arg-type]
                metrics["output_throughput"] = Metric(value=value)
                updated["spread"] = {**extra.get("spread", {}), "output_throughput": [value * 0.99, value * 1.01]}
            record = record.model_copy(update={"metrics": metrics, "extra": {**extra, **updated}})
        entries.append(entry_for(record, {s.doc_id: s.score for s in record.samples}, record.samples))
    assert found, f"no record matches {match}"
    return replace(inputs, records=tuple(entries))


def _lint(inputs: CardInputs, artifact_id: str, readme: str) -> list[str]:
    path = inputs.manifest.root / artifact_id / "README.md"
    problems = lint_cards(inputs.manifest, [CardText(artifact_id=artifact_id, path=path, text=readme)], inputs=inputs)
    return [p for p in problems if "link to plots/" not in p]  # rendered without plots


def _longdoc_best(inputs: CardInputs) -> str:
    """The config the reference's card calls best on Long-document copy, as its recorded ledger judged it."""
    readme = render_family(inputs, plots=False, artifacts=["reference"]).card("reference").readme
    return best_config(readme, "Long-document copy")


def test_a_best_that_loses_at_one_context_length_is_not_a_clear_win(nanbeige: CardInputs) -> None:
    """EAGLE-3 is the fastest batch-1 config of Reasoning on bf16 but, planted, slower than no speculation at
    16384 input tokens of the workload's context sweep: the Speed section, its Best cell, the headline and the
    serve command's note all say "not a clear win" and where it loses; no part of the card calls it best."""
    inputs = _edit(nanbeige, {"kind": "speed-sweep", "artifact": "bf16", "workload": "reasoning",
                              "speculative": "eagle3", "input_len": 16384}, {"throughput": 100.0})
    readme = render_family(inputs, plots=False, artifacts=["bf16"]).card("bf16").readme
    section = readme.split("### Reasoning (thinking on)\n")[1].split("\n### ")[0]
    assert ("fastest config: `eagle3`, not a clear win: slower than `none` at input 16384 tokens." in section)
    assert "best config" not in section and "| best |" not in section
    assert any(line.startswith("| `eagle3` |") and line.endswith("| not a clear win |")
               for line in section.splitlines())
    head = readme.split("## Measured figures")[1].split("<!-- measured:end -->")[0]
    line = next(line for line in head.splitlines() if line.startswith("- Reasoning (thinking on): "))
    assert line.endswith("over no speculation; not a clear win: slower than `none` at input 16384 tokens")
    assert "`eagle3`: fastest batch-1 config for Reasoning (thinking on), not a clear win (see Speed)." in readme
    assert "best batch-1 config for Reasoning" not in readme
    # The input length named is registered with its record, so the card still passes the lint.
    assert _lint(inputs, "bf16", readme) == []
    # Unplanted, the same workload is a clear win, called best everywhere.
    plain = render_family(nanbeige, plots=False, artifacts=["bf16"]).card("bf16").readme
    assert "Reasoning (thinking on)" in plain and "not a clear win:" not in plain


def test_a_recorded_unclear_win_is_never_called_best(demo_inputs: CardInputs) -> None:
    """`hfrelease eval` recorded the best config with `clear: false` (its repeats overlap the runner-up's): the
    cards say "not a clear win" with the config it does not clearly beat, never "best"."""
    best = _longdoc_best(demo_inputs)
    inputs = _edit(demo_inputs, {"kind": "speed-best", "artifact": "reference", "workload": "longdoc"},
                   {"extra": {"clear": False, "runner_up": "draft",
                              "not_clear": "its batch-1 repeats overlap draft's"}})
    readme = render_family(inputs, plots=False, artifacts=["reference"]).card("reference").readme
    section = readme.split("### Long-document copy\n")[1].split("\n## ")[0]
    # Why, as recorded (its repeats overlapping the runner-up's, or its lead within session noise), naming it.
    why = section.split(f"fastest config: `{best}`, not a clear win: its batch-1 ")[1].split(".")[0]
    assert "`draft`" in why
    assert "| best |" not in section
    head = readme.split("## Measured figures")[1].split("<!-- measured:end -->")[0]
    assert "- Long-document copy: " in head and f"not a clear win: its batch-1 {why}" in head
    assert f"`{best}`: fastest batch-1 config for Long-document copy, not a clear win (see Speed)." in readme
    assert _lint(inputs, "reference", readme) == []


def test_a_recorded_verdict_says_its_own_reason_never_an_overlap_it_did_not_find(demo_inputs: CardInputs) -> None:
    """A speed-best record judged against session noise (`not_clear`, README "How speed verdicts decide") is worded
    by its reason: no measured session noise, or a lead inside it; a record whose batch-1 win is clear
    (`not_clear` null) is never said to overlap, whatever `clear` says of its other points."""
    match = {"kind": "speed-best", "artifact": "reference", "workload": "longdoc"}
    best = _longdoc_best(demo_inputs)
    for why, said in (("session noise unmeasured: no point of this host recorded in two sessions",
                       "not a clear win: its batch-1 lead over `draft` is not shown beyond session noise (none "
                       "measured on this host)."),
                      ("within session noise of draft: 1.04x, 95 % 0.62x or less",
                       "not a clear win: its batch-1 lead over `draft` is within session noise.")):
        inputs = _edit(demo_inputs, match, {"extra": {"clear": False, "runner_up": "draft", "not_clear": why}})
        readme = render_family(inputs, plots=False, artifacts=["reference"]).card("reference").readme
        section = readme.split("### Long-document copy\n")[1].split("\n## ")[0]
        assert f"fastest config: `{best}`, {said}" in section and "overlap" not in section
        assert _lint(inputs, "reference", readme) == []
    inputs = _edit(demo_inputs, match, {"extra": {"clear": False, "runner_up": "draft", "not_clear": None}})
    readme = render_family(inputs, plots=False, artifacts=["reference"]).card("reference").readme
    assert "overlap" not in readme.split("### Long-document copy\n")[1].split("\n## ")[0]


def test_the_matrix_recommends_no_pairing_slower_than_the_reference_alone(nanbeige: CardInputs) -> None:
    """NVFP4A16 with EAGLE-3 planted at 2x over NVFP4A16 alone, the largest speedup of Reasoning, yet at 100 tok/s
    where the reference alone does 170: it pays on its target, and says why it is not recommended; the
    recommendation goes to a pairing faster than the reference alone."""
    inputs = _edit(nanbeige, {"kind": "speed", "artifact": "nvfp4a16", "workload": "reasoning", "speculative": "none",
                              "concurrency": 1}, {"throughput": 50.0})
    inputs = _edit(inputs, {"kind": "speed", "artifact": "nvfp4a16", "workload": "reasoning",
                            "speculative": "eagle3", "concurrency": 1}, {"throughput": 100.0})
    readme = render_family(inputs, plots=False, artifacts=["eagle3"]).card("eagle3").readme
    matrix = readme.split("## Draft \u00d7 target matrix")[1].split("### ")[1]
    rows = {line.split("](")[0].lstrip("| ["): line for line in matrix.splitlines() if line.startswith("| [")}
    assert f"| 2.00{TIMES} (1.96{DASH}2.04) | pays; the reference alone is faster |" in rows["Nanbeige4.2-3B-NVFP4A16"]
    recommended = [name for name, line in rows.items() if "**recommended**" in line]
    assert recommended == ["Nanbeige4.2-3B"]
    assert _lint(inputs, "eagle3", readme) == []
