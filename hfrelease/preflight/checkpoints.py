"""The checkpoints side of the preflight: each local source holds weights, and a quant's checkpoint is the
scheme its manifest declares.

A source directory without `*.safetensors` (a `checkpoints/reference/` holding only a README) used to pass
`check` and stop `eval` after its plan was made; a quant declared `W4A16` whose `config.json` says FP8
would be served as FP8 and carded as W4A16. Both are read from files here, before a server starts. Hub
sources' weights are looked up by `hub` (the repo's listing at the pinned commit); their `config.json` is
fetched here the way the chat templates are (one small file).

The scheme check follows compressed-tensors' own presets (`compressed_tensors.quantization.quant_scheme`,
the names llm-compressor's `scheme=` takes; `PRESETS` below): each of the checkpoint's
`quantization_config.config_groups` must quantize weights and input activations as the declared preset
does. A scheme that is no preset (a named mix with its own recipe) is not compared.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hfrelease.errors import ArtifactError, ConfigProblem
from hfrelease.files.hashing import WEIGHT_SUFFIX, weight_files
from hfrelease.manifest import Artifact, Manifest
from hfrelease.manifest.input_files import read_input_text

Fetcher = Callable[[str, str, str], Path | None]
# What decides how a tensor is quantized (QuantizationArgs fields); observers and dtypes of scales do not.
_COMPARED = ("num_bits", "type", "strategy", "group_size", "symmetric", "dynamic")
_OTHER_WEIGHTS = ("pytorch_model.bin", "model.bin", "consolidated.pth")


def weights_problems(manifest: Manifest) -> list[ConfigProblem]:
    """A local source that holds no `*.safetensors`: vLLM would have nothing hfrelease can hash or serve."""
    problems: list[ConfigProblem] = []
    for index, artifact in enumerate(manifest.artifact):
        if artifact.source.path is None:
            continue
        directory = manifest.resolve(artifact.source.path)
        if not directory.is_dir():
            continue  # load_manifest reports a missing source directory
        try:
            weight_files(directory)
        except ArtifactError:
            present = sorted(p.name for p in directory.iterdir())[:8]
            other = [name for name in present if name in _OTHER_WEIGHTS or name.endswith(".bin")]
            problems.append(ConfigProblem(
                location=f"artifact[{index}].source.path",
                message=f"{artifact.source.path} holds no {WEIGHT_SUFFIX} files (it holds: "
                        f"{', '.join(present) or 'nothing'}): there is nothing to serve or hash"
                        + (f"; {', '.join(other)} is a pickle format hfrelease does not serve: convert it to "
                           "safetensors" if other else "")
                        + "; point source.path at the checkpoint directory (config.json and *.safetensors)"))
    return problems


def _args(value: object) -> dict[str, Any] | None:
    return {key: value.get(key) for key in _COMPARED} if isinstance(value, Mapping) else None


def _describe(args: Mapping[str, Any] | None) -> str:
    if args is None:
        return "unquantized"
    group = f" {args['group_size']}" if args.get("group_size") else ""
    # "local": NVFP4's activations, scaled per block at run time under a calibrated global scale.
    dynamic = {True: " dynamic", "local": " dynamic per block"}.get(args.get("dynamic"), "")
    return f"{args.get('type')}{args.get('num_bits')} {args.get('strategy')}{group}{dynamic}"


def _shape(group: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    return _args(group.get("weights")), _args(group.get("input_activations"))


def _preset(weights: tuple[Any, ...] | None, inputs: tuple[Any, ...] | None
            ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    def named(values: tuple[Any, ...] | None) -> dict[str, Any] | None:
        return None if values is None else dict(zip(_COMPARED, values, strict=True))

    return named(weights), named(inputs)


# compressed-tensors 0.17's preset schemes (compressed_tensors.quantization.quant_scheme.PRESET_SCHEMES through
# preset_name_to_scheme, validated): (weights, input activations) as (num_bits, type, strategy, group_size,
# symmetric, dynamic). Written out, not imported: importing compressed-tensors imports torch and transformers,
# 20-30 s on a 2-core CPU, which `check` would pay for every quant; tests/preflight/test_checkpoints.py holds
# this table to the installed library's.
PRESETS: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {
    name: _preset(*shapes) for name, shapes in {
        "UNQUANTIZED": (None, None),
        "W8A16": ((8, "int", "group", 128, True, False), None),
        "W4A16": ((4, "int", "group", 128, True, False), None),
        "W4A16_ASYM": ((4, "int", "group", 128, False, False), None),
        "W8A8": ((8, "int", "channel", None, True, False), (8, "int", "token", None, True, True)),
        "INT8": ((8, "int", "channel", None, True, False), (8, "int", "token", None, True, True)),
        "W4A8": ((4, "int", "group", 128, True, False), (8, "int", "token", None, True, True)),
        "W4AFP8": ((4, "int", "group", 128, True, False), (8, "float", "token", None, True, True)),
        "FP8": ((8, "float", "tensor", None, True, False), (8, "float", "tensor", None, True, False)),
        "FP8_DYNAMIC": ((8, "float", "channel", None, True, False), (8, "float", "token", None, True, True)),
        "FP8_BLOCK": ((8, "float", "block", None, True, False), (8, "float", "group", 128, True, True)),
        "NVFP4A16": ((4, "float", "tensor_group", 16, True, False), None),
        "NVFP4": ((4, "float", "tensor_group", 16, True, False), (4, "float", "tensor_group", 16, True, "local")),
        "MXFP4A16": ((4, "float", "group", 32, True, False), None),
        "MXFP4": ((4, "float", "group", 32, True, False), (4, "float", "group", 32, True, True)),
        "MXFP8A16": ((8, "float", "group", 32, True, False), None),
        "MXFP8": ((8, "float", "group", 32, True, False), (8, "float", "group", 32, True, True)),
    }.items()
}


def _config(manifest: Manifest, artifact: Artifact, fetch: Fetcher | None) -> tuple[Mapping[str, Any] | None, str]:
    """The checkpoint's config.json (None: none readable here) and where it was read."""
    source = artifact.source
    if source.path is not None:
        path: Path | None = manifest.resolve(source.path) / "config.json"
        where = f"{source.path}/config.json"
    else:
        assert source.hub is not None and source.revision is not None
        where = f"{source.hub}@{source.revision[:12]}'s config.json"
        try:
            path = fetch(source.hub, source.revision, "config.json") if fetch is not None else None
        except LookupError:
            path = None  # the Hub check says why it cannot be read
    if path is None or not path.is_file():
        return None, where
    try:
        data = json.loads(read_input_text(path, what="config.json", expected="a model config of bounded size"))
    except ValueError:
        return None, where
    return (data if isinstance(data, Mapping) else None), where


def scheme_problems(manifest: Manifest, *, fetch: Fetcher | None, only: set[str] | None = None
                    ) -> list[ConfigProblem]:
    """A quant whose checkpoint's compressed-tensors config quantizes otherwise than its declared preset
    (`only`: these artifact ids alone)."""
    quants = [(i, a) for i, a in enumerate(manifest.artifact)
              if a.quantization is not None and a.quantization.format == "compressed-tensors"
              and (only is None or a.id in only)]  # fmt: skip
    found = []
    for index, artifact in quants:
        assert artifact.quantization is not None
        config, where = _config(manifest, artifact, fetch)
        quant = config.get("quantization_config") if config is not None else None
        if not isinstance(quant, Mapping) or quant.get("quant_method") != "compressed-tensors":
            continue  # not knowable from here (no config, or another format's)
        groups = quant.get("config_groups")
        if isinstance(groups, Mapping) and groups:
            found.append((index, artifact.quantization.scheme, where, groups))
    problems: list[ConfigProblem] = []
    for index, declared, where, groups in found:
        if declared.upper() not in PRESETS:
            continue  # a named mix: its recipe says what it is
        expected = PRESETS[declared.upper()]
        differing = {name: _shape(group) for name, group in groups.items()
                     if isinstance(group, Mapping) and _shape(group) != expected}  # fmt: skip
        if not differing:
            continue
        said = "; ".join(f"{name}: weights {_describe(w)}, input activations {_describe(a)}"
                         for name, (w, a) in sorted(differing.items()))
        shapes = list(differing.values())
        same = [name for name, shape in PRESETS.items() if all(s == shape for s in shapes)]
        problems.append(ConfigProblem(
            location=f"artifact[{index}].quantization.scheme",
            message=f"declared {declared!r} (weights {_describe(expected[0])}, input activations "
                    f"{_describe(expected[1])}) but {where} quantizes {said}: vLLM serves what the checkpoint "
                    "holds, and the card would name the wrong scheme",
            suggestion=same[0] if same else None))
    return problems
