"""`check` finds a source without weights, a quant whose checkpoint is another scheme than declared, and a task
data file lm-eval would not find, before a server starts (issue 27, part 2); `eval` stops on the last two
with exit 3 before it starts one."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from hfrelease.manifest import load_manifest
from hfrelease.preflight import run_preflight
from hfrelease.preflight.tasks import TaskCatalog
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

EMPTY = TaskCatalog(entries={}, version="test")
# compressed-tensors' config of an FP8_DYNAMIC checkpoint (llm-compressor 0.14), trimmed to the scheme's fields.
FP8_DYNAMIC_CONFIG = {
    "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
    "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "group_size": None, "symmetric": True,
                    "dynamic": False, "observer": "memoryless_minmax"},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "group_size": None,
                              "symmetric": True, "dynamic": True, "observer": None},
        "output_activations": None}},
}


def _edit(family: Path, change: Any) -> None:
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    change(data)
    path.write_text(tomli_w.dumps(data))


def _problems(family: Path) -> dict[str, str]:
    report = run_preflight(load_manifest(family), cache_dir=None, hub=False, catalog=EMPTY)
    return {p.location: p.render() for p in report.problems}


def test_the_fixture_family_passes(fixture_family: Path) -> None:
    """Weights in every checkpoint and no quantization_config to contradict: nothing to report."""
    assert _problems(fixture_family) == {}


def test_a_source_holding_only_a_readme_is_reported(fixture_family: Path, cli: CliRun) -> None:
    """`checkpoints/reference/` with only README.txt: exit 3 at the source's place, naming what it holds."""
    reference = fixture_family / "checkpoints" / "reference"
    reference.mkdir()
    (reference / "README.txt").write_text("weights go here\n")
    _edit(fixture_family, lambda d: d["artifact"][0].update(source={"path": "checkpoints/reference"}))
    code, out, err = cli(["check", "--json", "--offline", str(fixture_family)])
    assert code == ExitCode.CONFIG, err
    found = {p["location"]: p["message"] for p in json.loads(out)["problems"]}
    assert "no .safetensors files (it holds: README.txt)" in found["artifact[0].source.path"]


def test_a_pickle_checkpoint_is_named(fixture_family: Path) -> None:
    """A pytorch_model.bin beside no safetensors: the message says to convert it."""
    (fixture_family / "checkpoints" / "fp8" / "model.safetensors").unlink()
    (fixture_family / "checkpoints" / "fp8" / "pytorch_model.bin").write_bytes(b"pickle")
    message = _problems(fixture_family)["artifact[1].source.path"]
    assert "pytorch_model.bin is a pickle format" in message and "convert it to safetensors" in message


def _quantized(family: Path, config: dict[str, Any]) -> None:
    (family / "checkpoints" / "fp8" / "config.json").write_text(json.dumps({"quantization_config": config}))


@pytest.mark.parametrize("declared", ["FP8_DYNAMIC", "fp8_dynamic"])
def test_a_scheme_the_checkpoint_holds_passes(fixture_family: Path, declared: str) -> None:
    """Declared FP8_DYNAMIC over an FP8_DYNAMIC checkpoint (compressed-tensors' preset, any case): no problem."""
    _quantized(fixture_family, FP8_DYNAMIC_CONFIG)
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme=declared))
    assert _problems(fixture_family) == {}


def test_a_declared_scheme_the_checkpoint_contradicts_is_reported(fixture_family: Path, cli: CliRun) -> None:
    """Declared W4A16 over an FP8 checkpoint: exit 3 at the scheme, saying what each holds, suggesting the preset
    the checkpoint is."""
    _quantized(fixture_family, FP8_DYNAMIC_CONFIG)
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme="W4A16"))
    code, out, err = cli(["check", "--json", "--offline", str(fixture_family)])
    assert code == ExitCode.CONFIG, err
    problem = {p["location"]: p for p in json.loads(out)["problems"]}["artifact[1].quantization.scheme"]
    assert "declared 'W4A16' (weights int4 group 128, input activations unquantized)" in problem["message"]
    assert "group_0: weights float8 channel, input activations float8 token dynamic" in problem["message"]
    assert problem["suggestion"] == "FP8_DYNAMIC"


def _nvfp4_config(*, activations: bool) -> dict[str, Any]:
    """compressed-tensors 0.19's config of an NVFP4 (`activations`) or NVFP4A16 checkpoint as llm-compressor
    0.14 writes it (hfrelease.demo.nvfp4), trimmed to the scheme's fields: FP4 in blocks of 16 with FP8
    scales, activations scaled per block at run time ("dynamic": "local") over a calibrated global scale."""
    fp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True,
           "scale_dtype": "torch.float8_e4m3fn"}
    return {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {
                "targets": ["Linear"], "weights": {**fp4, "dynamic": False, "observer": "memoryless_minmax"},
                "input_activations": {**fp4, "dynamic": "local", "observer": "static_minmax"} if activations
                else None,
                "output_activations": None}}}


@pytest.mark.parametrize(("declared", "activations"), [("NVFP4", True), ("nvfp4a16", False)])
def test_an_nvfp4_checkpoint_passes_as_its_scheme(fixture_family: Path, declared: str, activations: bool) -> None:
    """Declared NVFP4 over a W4A4 NVFP4 checkpoint, NVFP4A16 over a weight-only one: no problem."""
    _quantized(fixture_family, _nvfp4_config(activations=activations))
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme=declared))
    assert _problems(fixture_family) == {}


def test_nvfp4_declared_over_a_weight_only_checkpoint_is_reported(fixture_family: Path) -> None:
    """Declared NVFP4 (W4A4) over an NVFP4A16 checkpoint: the two differ only in the activations, which decide
    whether a CPU build can serve it at all (hfrelease.serving.emulation); and the other way round."""
    _quantized(fixture_family, _nvfp4_config(activations=False))
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme="NVFP4"))
    message = _problems(fixture_family)["artifact[1].quantization.scheme"]
    assert ("declared 'NVFP4' (weights float4 tensor_group 16, input activations float4 tensor_group 16 "
            "dynamic per block)") in message
    assert "group_0: weights float4 tensor_group 16, input activations unquantized" in message
    assert message.endswith("(did you mean 'NVFP4A16'?)")
    _quantized(fixture_family, _nvfp4_config(activations=True))
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme="NVFP4A16"))
    message = _problems(fixture_family)["artifact[1].quantization.scheme"]
    assert "input activations float4 tensor_group 16 dynamic per block" in message
    assert message.endswith("(did you mean 'NVFP4'?)")


def test_a_named_mix_is_not_compared(fixture_family: Path) -> None:
    """A scheme that is no compressed-tensors preset (a mix with its own recipe) is left to its recipe."""
    _quantized(fixture_family, FP8_DYNAMIC_CONFIG)
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme="fp8-attn-int4-mlp"))
    assert _problems(fixture_family) == {}


def _relative_task(family: Path) -> None:
    """A task whose data file sits beside its YAML and is named relative to the YAML, as users first write it."""
    (family / "tasks" / "own.yaml").write_text(
        "task: own_task\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: own.jsonl\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: q\ndoc_to_target: a\n"
        "metric_list:\n  - metric: exact_match\n")
    (family / "tasks" / "own.jsonl").write_text('{"q": "1+1=", "a": "2"}\n')
    _edit(family, lambda d: d["gate"][0].update(task="own_task"))


def test_a_data_file_relative_to_the_yaml_is_reported_where_lm_eval_looks(
        fixture_family: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval hands data_files to datasets.load_dataset, which reads them from the working directory: a path
    relative to the YAML is exit 3 at the gate's task, with the path that works from here."""
    _relative_task(fixture_family)
    monkeypatch.chdir(fixture_family.parent)
    code, out, err = cli(["check", "--json", "--offline", str(fixture_family)])
    assert code == ExitCode.CONFIG, err
    problem = {p["location"]: p for p in json.loads(out)["problems"]}["gate[0].task"]
    assert "dataset_kwargs.data_files.test 'own.jsonl' does not exist" in problem["message"]
    assert "not the task YAML's directory" in problem["message"]
    assert problem["suggestion"] == "family/tasks/own.jsonl"


def test_a_data_file_relative_to_the_working_directory_passes(
        fixture_family: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same task run from the YAML's own directory finds its file: no problem (the rule, not a heuristic)."""
    _relative_task(fixture_family)
    monkeypatch.chdir(fixture_family / "tasks")
    assert _problems(fixture_family) == {}


def test_eval_stops_on_a_missing_data_file_before_a_server_starts(
        fixture_family: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """`eval` (check may not have run where it runs) exits 3 on the same problem, before planning a server."""
    _relative_task(fixture_family)
    monkeypatch.chdir(fixture_family.parent)
    monkeypatch.setenv("HFRELEASE_CACHE", str(fixture_family.parent / "cache"))
    code, _, err = cli(["eval", str(fixture_family), "--artifact", "fp8", "--gate", "arith", "--dry-run"])
    assert code == ExitCode.CONFIG, err
    assert "gate[0].task" in err and "own.jsonl" in err


def test_eval_stops_on_a_contradicted_scheme(fixture_family: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """`eval --artifact fp8` of a quant whose checkpoint is another scheme: exit 3, nothing started."""
    _quantized(fixture_family, FP8_DYNAMIC_CONFIG)
    _edit(fixture_family, lambda d: d["artifact"][1]["quantization"].update(scheme="W8A8"))
    monkeypatch.setenv("HFRELEASE_CACHE", str(fixture_family.parent / "cache"))
    code, _, err = cli(["eval", str(fixture_family), "--artifact", "fp8", "--dry-run"])
    assert code == ExitCode.CONFIG, err
    assert "artifact[1].quantization.scheme" in err and "declared 'W8A8'" in err



def test_the_preset_table_is_compressed_tensors_own() -> None:
    """`PRESETS` (written out so `check` does not import torch) equals the installed compressed-tensors' presets,
    validated as llm-compressor builds them for `scheme=NAME`."""
    quant_scheme = pytest.importorskip("compressed_tensors.quantization.quant_scheme")
    from hfrelease.preflight.checkpoints import PRESETS, _shape

    found = {name: _shape(quant_scheme.preset_name_to_scheme(name, ["Linear"]).model_dump())
             for name in quant_scheme.PRESET_SCHEMES}
    assert found == PRESETS
