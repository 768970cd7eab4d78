"""README "Release your own model", followed as written (issue 27, part 1): the section cannot rot.

The files the section shows (`# path` on a block's first line) are written from the README itself, and its
`bash` blocks run in order, each as written, in a git repository of their own (real `hf upload` to the
built-in Hub, llm-compressor, vLLM, lm-eval, the release workflow). What the test supplies instead of the
reader: the project's checkout as `../hfrelease` (its `.venv` and `.venv-quant`, as the section links
them; the `sh` block that clones and sets up is not run), the model (the demo build's tiny reference, a
Llama-style model with a ChatML template), the task's and the workload's data (the demo's), and the commit
`hf upload` printed, pinned where the section says. The upload runs with `HF_HUB_OFFLINE` unset, as in a
reader's shell (the test suite keeps it set).

One model and its quant: 3 vLLM servers on 2 cores (the gates', then the quant's for `--speed`; the
rehearsal's eval jobs find every result recorded and start none).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Release your own model"
PIN = "<the sha hf upload printed>"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]


def blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the section, in order."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(section())]


def test_the_section_has_every_step_the_issue_names() -> None:
    """The walkthrough names each step, so a reader finds it (and this test runs it)."""
    commands = "\n".join(text for language, text in blocks() if language == "bash")
    for step in ("hf upload", ".venv-quant/bin/python quantize.py", "hfrelease init", "hfrelease check",
                 "hfrelease eval model_cards/mymodel\n", "hfrelease eval model_cards/mymodel --speed",
                 "hfrelease render", "hfrelease publish", "hfrelease release model_cards/mymodel --hub",
                 "HF_HUB_DISABLE_XET=1"):
        assert step in commands, step
    files = [text.splitlines()[0] for language, text in blocks() if language in ("toml", "yaml", "python")]
    assert files == ["# recipe.yaml", "# quantize.py", "# model_cards/mymodel/release.toml",
                     "# model_cards/mymodel/tasks/my_arith.yaml", "# model_cards/mymodel/numeric_gate.py"]


def _run_block(script: str, *, repo: Path, env: dict[str, str], state: Path, groups: list[int],
               online: bool = False) -> str:
    """Run one bash block as written, in `repo`, with the variables earlier blocks exported; its output.

    `online`: with HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE (which huggingface_hub reads too) unset, as in a
    reader's shell."""
    lift = "unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE\n" if online else ""
    keep = f"export -p | grep -v -e HF_HUB_OFFLINE -e TRANSFORMERS_OFFLINE > {state}"
    wrapped = f"set -e\n[ -f {state} ] && source {state}\n{lift}{script}\n{keep}\n"
    process = subprocess.Popen(["bash", "-c", wrapped], cwd=repo, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    groups.append(process.pid)  # its background servers stay in its process group until teardown
    out, _ = process.communicate(timeout=1500)
    assert process.returncode == 0, f"{script}\n-> exit {process.returncode}\n{out[-6000:]}"
    return out


def test_a_maintainer_releases_their_own_model_as_the_readme_says(tmp_path: Path, demo_build: dict[str, Path]) -> None:
    """Upload, pin, quantize, init, check, eval, eval --speed, render, release --hub URL, publish: all exit 0,
    both Hubs hold the quant's release and its card has speed tables. The maintainer's model is the demo's
    reference (`demo_build`: built here when this is the session's first test that needs it)."""
    (tmp_path / "hfrelease").symlink_to(ROOT)  # the section's ../hfrelease checkout
    repo = tmp_path / "my-release"
    repo.mkdir()
    shutil.copytree(ROOT / "build" / "demo" / "reference", repo / "my-model")
    # The demo's checkpoints name the demo family's own architecture, which vLLM knows only through that
    # family's plugin; a maintainer's model here is a plain Llama (its config says so, as the weights are).
    # Without this the test passed only where an earlier test had installed the demo's plugin into .venv (a
    # fresh clone's suite failed it: "Model architectures ['HfreleaseDemoForCausalLM'] are not supported").
    config = repo / "my-model" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "architectures": ["LlamaForCausalLM"]}, indent=2))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_")) or k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env |= {"HF_HOME": str(tmp_path / "hf-home"), "HFRELEASE_CACHE": str(tmp_path / "cache"),
            "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"), "VLLM_TARGET_DEVICE": env.get("VLLM_TARGET_DEVICE", "cpu")}
    state = tmp_path / "exported.sh"
    groups: list[int] = []
    revision = ""
    try:
        for language, text in blocks():
            if language in ("toml", "yaml", "python"):
                name = text.splitlines()[0].removeprefix("# ")
                path = repo / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text.replace(PIN, revision), encoding="utf-8")
                if name.endswith("release.toml"):
                    assert revision and revision in path.read_text()
                    _family_data(repo / "model_cards" / "mymodel")
                continue
            if language != "bash":
                continue
            uploads = "hf upload" in text
            out = _run_block(text, repo=repo, env=env, state=state, groups=groups, online=uploads)
            if uploads:
                revision = re.findall(r"/commit/([0-9a-f]{40})", out)[-1]
        _published(repo, env)
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)
    card = (repo / "model_cards" / "mymodel" / "fp8" / "README.md").read_text()
    speed = card.split("\n## Speed\n", 1)[1].split("\n## ", 1)[0]
    assert "| Config | Output tok/s |" in speed, speed[:600]
    # The rehearsal ran the workflow init --github wrote: every job succeeded, the quant published from it.
    assert (repo / ".github" / "workflows" / "release.yml").is_file()
    assert (repo / "rehearsal" / "jobs" / "publish").is_dir()


def _published(repo: Path, env: dict[str, str]) -> None:
    """Both Hubs (still served) hold the quant's release v0.1, and the vendor's repo is untouched by it."""
    from huggingface_hub import HfApi

    from hfrelease.files.sources import hub_access

    for log in ("hub.log", "rehearsal-hub.log"):
        match = re.search(r"^HF_ENDPOINT=(\S+)$", (repo / log).read_text(), re.MULTILINE)
        assert match is not None, log
        with hub_access(match.group(1)):
            api = HfApi(endpoint=match.group(1), token=False)
            assert "README.md" in api.list_repo_files("me/my-model-FP8-Dynamic", revision="v0.1"), log
            assert "v0.1" not in {t.name for t in api.list_repo_refs("me/my-model").tags}, log


def _family_data(family: Path) -> None:
    """The data the section describes in prose: the task's questions and the workload's prompts (the demo's)."""
    (family / "tasks").mkdir(exist_ok=True)
    shutil.copyfile(ROOT / "build" / "demo" / "tasks" / "demo_arith.jsonl", family / "tasks" / "my_arith.jsonl")
    (family / "prompts").mkdir(exist_ok=True)
    shutil.copyfile(ROOT / "model_cards" / "demo" / "prompts" / "chat.jsonl", family / "prompts" / "chat.jsonl")
