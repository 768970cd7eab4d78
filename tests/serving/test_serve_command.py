"""The `vllm serve` command built from a manifest: the seeds' flags, overrides, speculative configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfrelease.manifest import load_manifest
from hfrelease.manifest.model import Serve
from hfrelease.serving.command import build_serve_command, merged_serve

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
NANBEIGE = load_manifest(ROOT / "model_cards" / "nanbeige4.2-3b")


def test_public_command_matches_the_seed_card() -> None:
    """The FP8 card's serve command is what the flagship manifest builds."""
    fp8 = NANBEIGE.artifact_by_id("fp8-dynamic")
    eagle = next(s for s in NANBEIGE.speculative if s.id == "eagle3")
    command = build_serve_command(
        NANBEIGE, fp8, model=fp8.repo, speculative=eagle, draft_model=NANBEIGE.artifact_by_id("eagle3").repo
    )
    assert command.argv[:3] == ("vllm", "serve", "NullSense/Nanbeige4.2-3B-FP8-Dynamic")
    text = command.display()
    assert text.startswith("VLLM_ATTENTION_BACKEND=TRITON_ATTN vllm serve")
    for flag in ("--trust-remote-code", "--max-model-len 65536", "--kv-cache-dtype fp8", "--reasoning-parser qwen3",
                 "--enable-auto-tool-choice", "--tool-call-parser qwen3_xml"):
        assert flag in text
    config = json.loads(command.argv[command.argv.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "NullSense/Nanbeige4.2-3B-EAGLE3", "num_speculative_tokens": 3}
    assert "--served-model-name" not in command.argv  # served under its repo id already
    assert "--port" not in command.argv


def test_run_command_names_the_model_and_port() -> None:
    """The command hfrelease runs serves local files under the repo id, on the port it chose."""
    ref = NANBEIGE.reference
    command = build_serve_command(NANBEIGE, ref, model="/models/bf16", host="127.0.0.1", port=8123)
    argv = list(command.argv)
    assert argv[argv.index("--served-model-name") + 1] == "Nanbeige/Nanbeige4.2-3B"
    assert argv[argv.index("--port") + 1] == "8123"
    assert command.served_model_name == "Nanbeige/Nanbeige4.2-3B"
    assert command.plugin == "vllm_plugin"


def test_ngram_config() -> None:
    """ngram speculation carries its prompt-lookup window and no draft model."""
    ngram = next(s for s in NANBEIGE.speculative if s.id == "ngram")
    command = build_serve_command(NANBEIGE, NANBEIGE.reference, model="m", speculative=ngram)
    config = json.loads(command.argv[command.argv.index("--speculative-config") + 1])
    assert config == {"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert command.speculative == "ngram"


def test_overrides_merge() -> None:
    """Artifact overrides append args, merge env, and replace scalar settings."""
    defaults = Serve(args=["--enforce-eager"], env={"A": "1", "B": "2"}, max_model_len=4096)
    override = Serve(args=["--seed", "7"], env={"B": "3"}, max_model_len=2048)
    merged = merged_serve(defaults, override)
    assert merged.args == ["--enforce-eager", "--seed", "7"]
    assert merged.env == {"A": "1", "B": "3"}
    assert merged.max_model_len == 2048
    assert merged_serve(defaults, None) is defaults


def test_display_redacts_secrets() -> None:
    """A token-shaped value in an argument never reaches the displayed command."""
    from hfrelease.serving.command import ServeCommand

    token = "hf_" + "a" * 30
    command = ServeCommand(argv=("vllm", "serve", "m", "--x", token), env={"HF_TOKEN": token}, served_model_name="m")
    assert token not in command.display()
