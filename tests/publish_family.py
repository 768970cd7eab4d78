"""Fixtures of the publish tests: a tiny family built in tmp, the built-in Hub, a real HfApi client.

Re-exported by the conftest of each folder that uses them (tests/publish, tests/bundle, tests/compare);
`publish_isolation` is autouse in tests/publish and tests/bundle, and named by the tests elsewhere that need it.

Like tests/hub, the client is loopback-only with Xet off (`HF_HUB_DISABLE_XET` is read at import, so it is
set before huggingface_hub is imported and the constant is patched too). Families are written from
scratch: real safetensors files (random bytes, so no two repos share content), a rendered card and a
citation per artifact, a declared train_command.txt, and a vLLM plugin package.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import json
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import HfApi
from safetensors.numpy import save_file

from hfrelease.bundle import PluginReport
from hfrelease.files.hashing import HashCache
from hfrelease.hub import HubServer, serve
from hfrelease.manifest import Manifest, load_manifest

TOKEN = "hf_publishtest_0123456789abcdef"
OWNER = "alice"


@pytest.fixture
def publish_isolation(isolated_hub_client: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Loopback only, no Xet, no token or cache of the person running the tests (tests/conftest.py), and
    a hash cache of the test's own."""
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "hfrelease-cache"))


def write_weights(path: Path, size: int, *, seed: int) -> None:
    """A real safetensors file of about `size` bytes of random (incompressible, unique) data."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(seed).integers(0, 256, size=size, dtype=np.uint8)
    save_file({"model.layers.0.weight": data}, str(path))


def write_plugin(directory: Path, *, entry_point: bool = True) -> None:
    (directory / "tiny_plugin").mkdir(parents=True, exist_ok=True)
    (directory / "tiny_plugin" / "__init__.py").write_text("def register() -> None:\n    pass\n")
    group = '[project.entry-points."vllm.general_plugins"]\ntiny = "tiny_plugin:register"\n' if entry_point else ""
    (directory / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "tiny-vllm-plugin"\nversion = "0.1.0"\n\n'
        f'{group}\n[tool.setuptools]\npackages = ["tiny_plugin"]\n'
    )


def make_family(
    root: Path, *, quants: int = 2, weight_bytes: int = 4096, version: str = "1.0", card: bool = True, seed: int = 0
) -> Path:
    """A family directory with a reference (not published) and `quants` quant artifacts; returns it."""
    root.mkdir(parents=True, exist_ok=True)
    artifacts = [("ref", "reference", "upstream/Tiny-1M", False)]
    artifacts += [(f"q{i}", "quant", f"{OWNER}/Tiny-1M-Q{i}", True) for i in range(quants)]
    blocks = []
    for number, (ident, kind, repo, publish) in enumerate(artifacts):
        checkpoint = root / "checkpoints" / ident
        write_weights(checkpoint / "model.safetensors", weight_bytes, seed=seed * 100 + number)
        (checkpoint / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "id": ident}))
        (checkpoint / "generation_config.json").write_text('{"temperature": 0.0}\n')
        (checkpoint / "tokenizer.json").write_text('{"model": {"type": "BPE"}}\n')
        (checkpoint / "tokenizer_config.json").write_text('{"chat_template": null}\n')
        (checkpoint / "chat_template.jinja").write_text("{{ messages }}\n")
        block = f"""
            [[artifact]]
            id = "{ident}"
            kind = "{kind}"
            repo = "{repo}"
            publish = {str(publish).lower()}
            source = {{ path = "checkpoints/{ident}" }}
            """
        if kind == "quant":
            (checkpoint / "train_command.txt").write_text(f"llmcompressor oneshot --scheme W8A8 # {ident}\n")
            block += f"""files = ["checkpoints/{ident}/train_command.txt"]

            [artifact.quantization]
            scheme = "W8A8"
            tool = "llmcompressor"
            tool_version = "0.14.0.1"
            """
            if card:
                rendered = root / ident
                rendered.mkdir(exist_ok=True)
                (rendered / "README.md").write_text(f"---\nlicense: mit\n---\n# Tiny-1M {ident} {version}\n")
                (rendered / "CITATION.cff").write_text(f"cff-version: 1.2.0\ntitle: Tiny-1M {ident}\n")
        blocks.append(textwrap.dedent(block))
    write_plugin(root / "vllm_plugin")
    (root / "release.toml").write_text(
        textwrap.dedent(f"""\
        schema_version = 1

        [family]
        name = "tiny"
        display_name = "Tiny-1M"
        base_model = "upstream/Tiny-1M"
        owner = "{OWNER}"
        license = "mit"
        languages = ["en"]
        version = "{version}"

        [[family.authors]]
        name = "Test Author"

        [family.citation]
        key = "tiny2026"
        title = "Tiny-1M"
        year = 2026

        [serve]
        plugin = "vllm_plugin"

        [publish]
        tag = "v{{version}}"
        collection = "Tiny family"
        """)
        + "".join(blocks)
    )
    return root


def set_version(family: Path, version: str) -> None:
    toml = family / "release.toml"
    text = toml.read_text()
    start = text.index('version = "')
    end = text.index('"', start + len('version = "'))
    toml.write_text(text[:start] + f'version = "{version}"' + text[end + 1 :])


def fake_plugin_check(directory: Path, files: Sequence[str]) -> PluginReport:
    """Stands in for the pip-based check (tests/bundle/test_plugin_check.py runs the real one)."""
    return PluginReport(directory=directory, distribution="tiny-vllm-plugin", entry_points=("tiny = x:y",))


@pytest.fixture
def family(tmp_path: Path) -> Path:
    return make_family(tmp_path / "family")


@pytest.fixture
def manifest(family: Path) -> Manifest:
    return load_manifest(family)


@pytest.fixture
def cache(tmp_path: Path) -> HashCache:
    return HashCache(tmp_path / "hash-cache.json")


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    server = serve(tmp_path / "hub", tokens=[TOKEN], fault_injection=True)
    yield server
    server.shutdown()


@pytest.fixture
def api(hub: HubServer) -> HfApi:
    return HfApi(endpoint=hub.url, token=TOKEN)
