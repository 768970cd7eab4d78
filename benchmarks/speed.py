"""Speed anchors: hfrelease's batch-1 tok/s against `vllm bench serve` run by hand, and hfrelease's overhead.

    .venv/bin/python benchmarks/speed.py [--repeats 3] [--configs none,ngram] [--num-prompts N]

One run of `run_speed` over a copy of the demo family (workloads `chat` and `longdoc` on the reference,
with the configs given, empty ledger). Its benchmark runner is wrapped: after each measured repeat
hfrelease ran in-process, the same `vllm bench serve` argv is run again by hand, as its own process,
on the same server, with the order of the two alternating from repeat to repeat. Reported:

- per point, median batch-1 output tok/s recorded by hfrelease / median of the by-hand runs (bar:
  0.97-1.03), and the median of the per-repeat ratios (each repeat's two runs are back to back);
- with `--control`, the accuracy bar relative to this machine's noise: each repeat is run by hand a second
  time, and the ratios by hand again / by hand of every repeat of the run (the same command twice, back to
  back: an A/A control) span the machine's noise. A point's hfrelease / by-hand ratio (the median of its
  per-repeat ratios) inside that span cannot be told from the noise: verdict "within noise"; outside it,
  "outside noise". The run's verdict is "within noise" when every point is;
- time outside the server / speed-anchor wall time, both with server start-up and stop excluded and
  the by-hand runs subtracted (bar: <= 0.05). "Inside the server" is the benchmark's own `duration` of
  every measured and warm-up invocation: the time from the first request sent to the last answer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def family_copy(tmp: Path, *, repeats: int, configs: list[str], num_prompts: int | None,
                ignore_eos: bool = False) -> Path:
    """model_cards/demo with an empty ledger, its chat and longdoc workloads on the reference only."""
    import tomli_w

    target = tmp / "model_cards" / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", target, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    (tmp / "build").symlink_to(ROOT / "build")
    (target / "results").mkdir()
    data = tomllib.loads((target / "release.toml").read_text())
    # compare_quants off: the anchors compared are the reference's; the quants' comparison points (on by
    # default since workloads gained them) would add a server and its by-hand runs per quant.
    data["workload"] = [
        {**w, "speculative": configs, "repeats": repeats, "concurrency": [1], "artifacts": ["reference"],
         "ignore_eos": ignore_eos, "compare_quants": False,
         **({"num_prompts": num_prompts} if num_prompts else {})}
        for w in data["workload"] if w["id"] in ("chat", "longdoc")
    ]
    (target / "release.toml").write_text(tomli_w.dumps(data))
    return target


def serve_vendor_hub(tmp: Path, family: Path) -> None:
    """The reference is a vendor repo on the demo's built-in Hub: a copy of it served, the family pinned to it."""
    from demo_hub import serve_demo_hub

    from hfrelease.demo.vendor import read_pins

    serve_demo_hub(tmp)
    # family_copy rewrote the manifest as plain TOML: its sources are pinned on the data, not as a text edit.
    import tomli_w

    pins = read_pins(ROOT / "build" / "demo")
    data = tomllib.loads((family / "release.toml").read_text())
    for artifact in data["artifact"]:
        if artifact["source"].get("hub") in pins:
            artifact["source"]["revision"] = pins[artifact["source"]["hub"]]
    (family / "release.toml").write_text(tomli_w.dumps(data))


class SideBySide:
    """The benchmark runner: hfrelease's in-process run, and the same argv by hand, order alternating."""

    def __init__(self, hand_dir: Path, *, control: bool = False) -> None:
        self.hand_dir = hand_dir
        self.control = control
        self.hand_seconds = 0.0
        self.hand: dict[str, list[float]] = {}  # point directory -> by-hand output tok/s
        self.ours: dict[str, list[float]] = {}  # point directory -> hfrelease's output tok/s, same order
        self.again: dict[str, list[float]] = {}  # point directory -> a second by-hand run (--control)

    def __call__(self, argv: Sequence[str], log_path: Path) -> None:
        from hfrelease.speed.bench import run_in_process

        args = list(argv)
        name = args[args.index("--result-filename") + 1] if "--result-filename" in args else ""
        if not re.fullmatch(r"r\d+\.json", name):  # warm-ups
            run_in_process(argv, log_path)
            return
        point = args[args.index("--result-dir") + 1]
        hand_dir = self.hand_dir / Path(point).relative_to(Path(point).parents[2])
        hand = [*args[:args.index("--result-dir")], "--result-dir", str(hand_dir), "--result-filename", name]
        # Alternate within each point: repeat 0 hfrelease first, repeat 1 by hand first, ... With --control
        # a second by-hand run goes last: by hand / by hand again is the machine's own noise floor.
        first_by_hand = int(name[1:-5]) % 2 == 1
        if first_by_hand:
            self._by_hand(hand, log_path)
        run_in_process(argv, log_path)
        if not first_by_hand:
            self._by_hand(hand, log_path)
        result = json.loads((hand_dir / name).read_text())
        self.hand.setdefault(point, []).append(float(result["output_throughput"]))
        if self.control:
            again = [*hand[:-1], f"again-{name}"]
            self._by_hand(again, log_path)
            second = json.loads((hand_dir / f"again-{name}").read_text())
            self.again.setdefault(point, []).append(float(second["output_throughput"]))
        ours = json.loads((Path(point) / name).read_text())
        self.ours.setdefault(point, []).append(float(ours["output_throughput"]))

    def _by_hand(self, argv: list[str], log_path: Path) -> None:
        from hfrelease.speed.bench import run_subprocess
        from hfrelease.speed.runner import vllm_executable

        argv = [vllm_executable(), *argv[1:]]
        started = time.monotonic()
        run_subprocess(argv, log_path, env=os.environ)
        self.hand_seconds += time.monotonic() - started


def _widen_stall_window(seconds: float = 900.0) -> None:
    """The by-hand runs happen inside the benchmark call that hfrelease watches for a stalled server (no token
    counted on /metrics for `stall_window`, 60 s): each is a fresh `vllm bench serve` process whose start-up
    generates nothing, ~15 s on a quiet machine and over a minute with both cores loaded by neighbours (load
    average 8-10 on 2026-12-01, the reference's servers ended after their first repeat, during by-hand runs).
    The silence is the by-hand client's, not the server's, so the window is widened for this benchmark only."""
    from hfrelease.speed import runner

    runner.stall_window = lambda request_timeout: max(request_timeout, seconds)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", default="none,ngram")
    parser.add_argument("--num-prompts", type=int, help="prompts per run (default: each prompt file once)")
    parser.add_argument("--ignore-eos", action="store_true",
                        help="generate exactly output_len tokens per request: the demo's chat answers are ~5 "
                             "tokens, so its runs last seconds and one stall of a neighbour moves them by 10-20 %%")
    parser.add_argument("--control", action="store_true",
                        help="also run each repeat by hand a second time: the ratio of two by-hand runs of the "
                             "same point is the noise floor any ratio here is measured against")
    args = parser.parse_args()

    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.speed.plan import plan_speed
    from hfrelease.speed.runner import run_speed

    os.environ.setdefault("HFRELEASE_CACHE", tempfile.mkdtemp(prefix="hfrelease-cache-"))
    with tempfile.TemporaryDirectory(prefix="hfrelease-speed-bench-") as tmp_name:
        tmp = Path(tmp_name)
        family = family_copy(tmp, repeats=args.repeats, configs=args.configs.split(","),
                             num_prompts=args.num_prompts, ignore_eos=args.ignore_eos)
        serve_vendor_hub(tmp, family)
        manifest = load_manifest(family)
        ledger = Ledger(family / "results")
        plan = plan_speed(manifest, ledger=ledger, hash_cache=None)
        runner = SideBySide(tmp / "by-hand", control=args.control)
        _widen_stall_window()
        report = run_speed(plan, ledger=ledger, run_dir=tmp / "run", bench_runner=runner, preload=True)
        if report.failures:
            sys.exit(f"a server failed: {report.failures}")
        print(f"{'point':<32} {'hfrelease tok/s':>16} {'by hand tok/s':>14} {'ratio':>7} {'paired':>7}")
        ratios: list[float] = []
        paired_all: list[float] = []
        controls: list[float] = []
        control_repeats = [again / hand for point in runner.again
                           for again, hand in zip(runner.again[point], runner.hand[point], strict=True)]
        noise = (min(control_repeats), max(control_repeats)) if control_repeats else None
        verdicts: list[bool] = []
        for record in ledger.records(kind="speed"):
            point = next(p for p in runner.hand if f"{record.artifact_id}.{record.extra['speculative']}" in p
                         and p.endswith(f"{record.subject_id}-c{record.extra['concurrency']}"))
            ours = record.metrics["output_throughput"].value
            theirs = statistics.median(runner.hand[point])
            ratios.append(ours / theirs)
            # Each repeat's two runs are back to back (order alternating): their ratio cancels the drift
            # of a shared machine's load between repeats, which the ratio of medians does not.
            paired = statistics.median(a / b for a, b in zip(runner.ours[point], runner.hand[point], strict=True))
            paired_all.append(paired)
            label = f"{record.subject_id} [{record.extra['speculative']}] c{record.extra['concurrency']}"
            print(f"{label:<32} {ours:>16.1f} {theirs:>14.1f} {ours / theirs:>7.3f} {paired:>7.3f}")
            print(f"{'':<4}per repeat (hfrelease/by hand): "
                  + ", ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(runner.ours[point], runner.hand[point], strict=True)))
            if args.control:
                control = statistics.median(runner.again[point]) / theirs
                controls.append(control)
                print(f"{'':<4}control: by hand again {statistics.median(runner.again[point]):.1f} tok/s, "
                      f"ratio to by hand {control:.3f}")
            if noise is not None:
                inside = noise[0] <= paired <= noise[1]
                verdicts.append(inside)
                print(f"{'':<4}verdict: hfrelease / by hand {paired:.3f} is {'within' if inside else 'outside'} the "
                      f"A/A control's spread [{noise[0]:.3f}, {noise[1]:.3f}]")
        timing = report.timing
        wall = timing.wall - timing.server_start - timing.server_stop - runner.hand_seconds
        outside = wall - timing.measured - timing.warmup
        summary: dict[str, Any] = {
            "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
            "paired_ratio_min": round(min(paired_all), 3), "paired_ratio_max": round(max(paired_all), 3),
            **({"control_ratio_min": round(min(controls), 3), "control_ratio_max": round(max(controls), 3)}
               if controls else {}),
            **({"noise_spread": [round(noise[0], 3), round(noise[1], 3)],
                "verdict": "within noise" if all(verdicts) else "outside noise",
                "points_within_noise": f"{sum(verdicts)} of {len(verdicts)}"} if noise is not None else {}),
            "anchor_wall_s": round(wall, 1), "inside_server_s": round(timing.measured + timing.warmup, 1),
            "outside_server_s": round(outside, 1), "outside_ratio": round(outside / wall, 4),
            "scrape_s": round(timing.scrape, 1), "server_start_s": round(timing.server_start, 1),
            "by_hand_s": round(runner.hand_seconds, 1),
        }
        print(json.dumps(summary, indent=2))
        if noise is not None:
            # The answer this benchmark exists for, last and on one line: is hfrelease's tok/s against the
            # by-hand command inside the spread the same command shows against itself in this run?
            print(f"VERDICT: {summary['verdict']}: {summary['points_within_noise']} points' hfrelease / by hand "
                  f"(paired {min(paired_all):.3f}-{max(paired_all):.3f}) inside the A/A control's spread "
                  f"[{noise[0]:.3f}, {noise[1]:.3f}]")
        else:
            print("VERDICT: none (run with --control to measure the machine's noise in the same run)")


if __name__ == "__main__":
    main()
