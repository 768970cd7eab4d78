"""Demo-build training speed on a quiet and on a loaded machine, per thread policy, side by side.

The demo build trains the reference (`hfrelease.demo.training.train_model`) on this CPU. With every core's
worth of OpenMP threads that spin while they wait (torch's default), training collapses when other
processes load the machine: each step's parallel regions wait for a thread that the scheduler has parked.
This benchmark times the same training steps (the reference's shape and batch size, synthetic token ids
of the corpus's lengths) in a fresh process per policy, first alone, then beside `--hogs` CPU-bound
processes, and prints steps/s and the ratios that matter: loaded / quiet for each policy, and each
policy against torch's default. Absolute rates drift on a shared machine; the ratios measured in one run
hold.

    .venv/bin/python benchmarks/build_load.py --steps 60 --hogs 2

The policy the build uses is `hfrelease.demo.threads.training_threads` (printed as "build").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time

_CHILD = r"""
import json, os, random, sys, time
policy = json.loads(sys.argv[1])
import torch
from hfrelease.demo.model import REFERENCE_SPEC, TokenIds
from hfrelease.demo.training import Example, TrainingPlan, train_model
if policy["threads"] is not None:
    torch.set_num_threads(policy["threads"])
else:
    from hfrelease.demo.threads import apply_training_threads
    apply_training_threads()
rng = random.Random(0)
ids = TokenIds(vocab_size=512, eos_token_id=1, pad_token_id=0)
examples = []
for _ in range(700):
    n = rng.choice((24, 32, 40, 120))  # the corpus: short chats and ~4x longer copy examples
    toks = tuple(rng.randrange(2, 512) for _ in range(n))
    examples.append(Example(input_ids=toks, labels=toks))
steps = int(sys.argv[2])
train_model(REFERENCE_SPEC, ids, examples, TrainingPlan(steps=5), seed=0)  # warm-up: allocator, first kernels
started = time.perf_counter()
train_model(REFERENCE_SPEC, ids, examples, TrainingPlan(steps=steps), seed=0)
print(json.dumps({"steps_per_s": steps / (time.perf_counter() - started), "threads": torch.get_num_threads()}))
"""


def _hog(stop_at: float) -> None:
    # A CPU-bound neighbour, bounded in time: it stops by itself.
    x = 0
    while time.monotonic() < stop_at:
        x = (x * 1103515245 + 12345) % 2**31


def _measure(policy: dict[str, object], steps: int) -> dict[str, float]:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in policy.get("env", {}).items()})  # type: ignore[union-attr]
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(policy), str(steps)], env=env,
                         capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the loaded runs")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    policies: dict[str, dict[str, object]] = {
        f"default ({cores} threads, spinning)": {"threads": cores},
        "1 thread": {"threads": 1},
        "build": {"threads": None},
    }
    results: dict[str, dict[str, float]] = {}
    for load in ("quiet", "loaded"):
        for name, policy in policies.items():
            hogs: list[multiprocessing.Process] = []
            if load == "loaded":
                stop_at = time.monotonic() + 1800
                hogs = [multiprocessing.Process(target=_hog, args=(stop_at,), daemon=True) for _ in range(args.hogs)]
                for hog in hogs:
                    hog.start()
            try:
                got = _measure(policy, args.steps)
            finally:
                for hog in hogs:
                    hog.terminate()
                    hog.join()
            results[f"{name} / {load}"] = got
            print(f"{name:32} {load:7} {got['steps_per_s']:6.2f} steps/s  ({got['threads']:.0f} threads)", flush=True)
    default = next(iter(policies))
    print(f"\nratios ({args.steps} steps, {args.hogs} CPU-bound neighbours when loaded, {cores} cores):")
    for name in policies:
        quiet, loaded = results[f"{name} / quiet"]["steps_per_s"], results[f"{name} / loaded"]["steps_per_s"]
        print(f"  {name:32} loaded/quiet {loaded / quiet:5.2f}   "
              f"vs default: quiet {quiet / results[f'{default} / quiet']['steps_per_s']:5.2f}, "
              f"loaded {loaded / results[f'{default} / loaded']['steps_per_s']:5.2f}")


if __name__ == "__main__":
    main()
