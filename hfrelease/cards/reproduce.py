"""What a reader needs to re-run a card's figures (issue 25, part 6): each gate's `lm_eval` command and each
workload's `vllm bench serve` command against a server started with the card's serve command, the prompt
files by their path in the published repo (the bundle ships them, `files.rules.shipped_prompts`), and the
hardware the artifact's kernels need. Every command is folded one flag per line and a JSON value one key per
line, so that no line is wider than the Hub's card column.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from hfrelease.cards.text import Markdown, code_block, code_span, escape_markdown
from hfrelease.files.rules import gate_command_files, prompt_repo_path
from hfrelease.manifest import Artifact, Gate, Manifest, Workload

BASE_URL = "http://localhost:8000"  # where `vllm serve` listens by default
MAX_LINE = 72  # a JSON value longer than half this is spread one key per line
# Characters of a code line that fit the 730 px card column: 13 px monospace is about 7.8 px a character,
# less the block's padding (the Chromium preview test measures the real width).
COLUMN_CHARS = 88


def fold(argv: Sequence[str]) -> str:
    """A command one flag (with its value) per line, continued with backslashes; a JSON object value is
    spread one key per line inside its quotes (the shell keeps the newlines, JSON ignores them)."""
    lines: list[str] = []
    current: list[str] = []
    for word in argv:
        if word.startswith("-") and current:
            lines.append(" ".join(current))
            current = []
        current.append(quote_word(word, indent=" " * (4 + len(" ".join(current)) + 1)))
    lines.append(" ".join(current))
    return " \\\n  ".join(lines)


def quote_word(word: str, *, indent: str) -> str:
    """`word` quoted for a POSIX shell; a long JSON object one key per line, continued at `indent`."""
    if word.startswith("{") and len(word) > MAX_LINE // 2:
        try:
            value = json.loads(word)
        except ValueError:
            return shlex.quote(word)
        if isinstance(value, dict):
            items = [json.dumps({k: v}, ensure_ascii=False)[1:-1] for k, v in value.items()]
            return "'{" + (",\n" + indent).join(items) + "}'"
    return shlex.quote(word)


def unfold(text: str) -> list[str]:
    """The argv of a folded command, JSON values compacted back to one line (what the lint compares)."""
    words = shlex.split(text.replace("\\\n", " "))
    out = []
    for word in words:
        compact = word
        if word.startswith("{") and "\n" in word:
            with contextlib.suppress(ValueError):
                compact = json.dumps(json.loads(word), separators=(",", ":"), ensure_ascii=False)
        out.append(compact)
    return out


def gate_command(manifest: Manifest, gate: Gate, artifact: Artifact) -> Markdown | None:
    """The command that runs `gate` against `artifact` served on this machine: `lm_eval`, or a custom gate's
    own command naming its files by their path in the published repo (`shipped_command`); None for the
    fidelity gate (hfrelease's own). A gate with `seeds` shows one command per seed, each as it was run
    (`hfrelease.verdicts.seeds.seed_runs`: the seed in every place it goes), in one block."""
    from hfrelease.verdicts.seeds import seed_runs

    runs = seed_runs(gate)
    commands = [argv for run in runs if (argv := _run_argv(manifest, run, artifact, several=len(runs) > 1))]
    if not commands:
        return None
    if len(commands) == 1:
        return code_block(fold(commands[0]), language="bash")
    return code_block("\n\n".join(f"# seed {run.seed}\n{fold(argv)}" for run, argv in zip(runs, commands, strict=True)),
                      language="bash")


def _run_argv(manifest: Manifest, run: Gate, artifact: Artifact, *, several: bool) -> list[str] | None:
    """One run's command line (its results apart from the other seeds' when there are several)."""
    out = f"results/{run.id}" + (f"-seed{run.seed}" if several else "")
    if run.task is not None:
        from hfrelease.evaluation.lm_eval_command import lm_eval_call

        call = lm_eval_call(run, base_url=BASE_URL, model=artifact.repo,
                            task_dir=Path("tasks") if run.task_dir else None,
                            tokenizer=artifact.repo if run.api != "chat" else None)
        return call.argv(output_path=out)
    if run.command is None and run.entry_point is None:
        return None
    from hfrelease.evaluation.custom_gate import custom_gate_argv

    argv = custom_gate_argv(run.model_copy(update={"command": shipped_command(manifest, run)}), base_url=BASE_URL,
                            model=artifact.repo, out=Path(f"{out}.json"))
    if argv[0] == sys.executable:  # hfrelease ran it with its own interpreter; a reader runs their `python`
        argv[0] = run.command[0] if run.command is not None else "python"
    return argv


def shipped_command(manifest: Manifest, gate: Gate) -> list[str] | None:
    """A custom gate's command with each file it names at its path in the published repo (the bundle ships
    them there: `files.rules.gate_command_files`), as a reader of the card runs it."""
    if gate.command is None:
        return None
    command = list(gate.command)
    for index, repo_path in gate_command_files(manifest, gate).items():
        command[index] = repo_path
    return command


def workload_command(manifest: Manifest, workload: Workload, artifact: Artifact) -> Markdown:
    """The `vllm bench serve` command of one workload's batch-1 point on `artifact` (its prompts as shipped)."""
    from hfrelease.speed.bench import BenchRequest, bench_argv

    request = BenchRequest(base_url=BASE_URL, model=artifact.repo, tokenizer=artifact.repo,
                           prompts=Path(prompt_repo_path(workload.prompts)),
                           num_prompts=workload.num_prompts or _count_prompts(manifest, workload),
                           output_len=workload.output_len, concurrency=min(workload.concurrency),
                           thinking=workload.thinking, ignore_eos=workload.ignore_eos,
                           temperature=workload.temperature, top_p=workload.top_p)
    argv = [w for w in bench_argv(request) if w != "--disable-tqdm"]
    return code_block(fold(argv), language="bash")


def hardware_line(manifest: Manifest, artifact: Artifact) -> Markdown:
    """What the artifact's kernels need (the seeds' caveats): FP8 compute SM89+, NVFP4 SM100+, int8 SM75+ on
    NVIDIA GPUs, and the attention backend the serve settings choose."""
    scheme = (artifact.quantization.scheme if artifact.quantization else "").upper()
    needs = []
    if "NVFP4" in scheme or "FP4" in scheme:
        needs.append("NVFP4 kernels need an NVIDIA GPU of compute capability 10.0 or newer (SM100, Blackwell)")
    elif "FP8" in scheme:
        needs.append("FP8 compute needs an NVIDIA GPU of compute capability 8.9 or newer (SM89: Ada, Hopper, "
                     "Blackwell); older GPUs fall back to weight-only FP8 (Marlin)")
    elif "W8A8" in scheme or "INT8" in scheme:
        needs.append("int8 W8A8 kernels need an NVIDIA GPU of compute capability 7.5 or newer (SM75), or vLLM's "
                     "CPU backend")
    else:
        needs.append("bf16 weights: any GPU vLLM supports, or vLLM's CPU backend")
    from hfrelease.serving.command import merged_serve

    env = merged_serve(manifest.serve, artifact.serve).env or {}
    backend = env.get("VLLM_ATTENTION_BACKEND")
    needs.append(f"attention backend {code_span(backend)} (set in the serve command's environment)" if backend
                 else "vLLM's default attention backend for the hardware")
    return Markdown(escape_markdown("; ".join(needs[:1])) + "; " + "; ".join(needs[1:]))


def prompts_named(workload: Workload) -> Markdown:
    """A workload's prompt file by its path in the published repo."""
    return code_span(prompt_repo_path(workload.prompts))


def _count_prompts(manifest: Manifest, workload: Workload) -> int:
    """The prompts of a workload's file (each non-blank line one), as the speed run sends them all."""
    try:
        text = manifest.resolve(workload.prompts).read_text(encoding="utf-8")
    except OSError:
        return 1
    return sum(1 for line in text.splitlines() if line.strip()) or 1
