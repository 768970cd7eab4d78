"""How long `hfrelease --help` takes, as a ratio against a bare `python -c pass`, measured side by side.

    .venv/bin/python benchmarks/cli_startup.py [--runs 20]

Runs are interleaved (python, hfrelease, python, ...) so that machine noise hits both alike; the
medians and their ratio are printed. The foundation issue's bar: --help under 0.3 s of wall time after
the first run, which needs the CLI to import nothing heavy (vLLM, lm-eval, torch, pydantic) for help.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HFRELEASE = [str(Path(sys.executable).with_name("hfrelease"))]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "hfrelease --help": [*HFRELEASE, "--help"],
    "hfrelease eval --help": [*HFRELEASE, "eval", "--help"],
}


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    for command in COMMANDS.values():  # the first run pays for .pyc compilation and a cold page cache
        wall(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            times[name].append(wall(command))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<24}{'median s':>10}{'p90 s':>10}{'÷ python':>10}")
    for name, samples in times.items():
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(f"{name:<24}{median:>10.3f}{p90:>10.3f}{median / base:>10.2f}")
    worst = max(statistics.median(times[n]) for n in COMMANDS if n.startswith("hfrelease"))
    print(f"\nslowest help: {worst:.3f} s (bar: 0.300 s) -> {'OK' if worst < 0.3 else 'TOO SLOW'}")


if __name__ == "__main__":
    main()
