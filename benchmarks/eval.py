"""`hfrelease eval` costs, as ratios measured side by side in one run on the demo family.

    .venv/bin/python benchmarks/eval.py [--rounds 3]

1. Orchestration overhead: `hfrelease eval --endpoint` of the reference's gate set on an already-started
   vLLM server ÷ lm-eval's own CLI run with the same settings (the commands `--dry-run` prints) against
   the same server, interleaved over rounds; medians. Bar: ≤ 1.05.
2. Warm re-run of the fully recorded family ÷ the cold run that recorded it. Bar: ≤ 0.02, zero requests.
3. Hashing: weight bytes read for content hashes by the cold run (at most 1x the family's weight bytes) and
   by the warm run (0).
Needs the demo family (`hfrelease demo build`); starts one server at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
GATES = ["arith", "arith-nothink", "mc"]


def family_copy(base: Path) -> Path:
    family = base / "model_cards" / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    (family / "results").mkdir()
    (base / "build").symlink_to(ROOT / "build")
    return family


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main() -> None:  # noqa: PLR0915 - one linear script: measure, then print
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overhead-only", action="store_true", help="skip the cold/warm family runs")
    args = parser.parse_args()

    from hfrelease.evaluation.plan import describe_gate, model_files, plan_eval
    from hfrelease.ledger.hashing import weight_files
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.serving.command import build_serve_command
    from hfrelease.serving.plugin import ensure_plugin
    from hfrelease.serving.process import VllmServer, free_port

    work = Path(tempfile.mkdtemp(prefix="hfrelease-bench-eval-"))
    env = {**os.environ, "HFRELEASE_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    family = family_copy(work)
    hfrelease = [str(VENV_BIN / "python"), "-m", "hfrelease"]

    # 2 + 3: cold and warm runs of the whole family.
    cold_s = warm_s = 0.0
    cold_report: dict[str, int] = {"servers_started": 0, "hash_bytes_read": 0}
    warm_report: dict[str, int] = {"requests_sent": 0, "hash_bytes_read": 0}
    if not args.overhead_only:
        cold_s, cold = timed([*hfrelease, "eval", str(family), "--json", "--run-dir", str(work / "cold")], work, env)
        warm_s, warm = timed([*hfrelease, "eval", str(family), "--json", "--run-dir", str(work / "warm")], work, env)
        cold_report, warm_report = json.loads(cold.stdout), json.loads(warm.stdout)
    manifest = load_manifest(family)
    weight_bytes = 0
    for artifact in manifest.artifact:
        if artifact.kind != "draft" and artifact.source.path:
            directory = manifest.resolve(artifact.source.path)
            weight_bytes += sum((directory / f).stat().st_size for f in weight_files(directory))

    # 1: overhead on a running server.
    reference = manifest.reference
    plan = plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["reference"],
                     gates=GATES)
    job = plan.servers[0]
    port = free_port()
    command = build_serve_command(manifest, reference, model=str(job.model_dir), host="127.0.0.1", port=port,
                                  vllm=str(VENV_BIN / "vllm"))
    if command.plugin:
        ensure_plugin(manifest.resolve(command.plugin))
    ours: list[float] = []
    theirs: list[float] = []
    with VllmServer(command, log_path=work / "server.log", port=port) as server:
        server.wait_until_ready()
        base_url = server.endpoint.base_url
        lm_eval_lines = [
            describe_gate(manifest, g, base_url=base_url, model=reference.repo,
                          files=model_files(reference, job.model_dir))
            for g in job.gates
        ]
        for round_ in range(args.rounds):
            seconds, done = timed([*hfrelease, "eval", str(family), "--artifact", "reference", "--endpoint", base_url,
                                   "--force", *[a for g in GATES for a in ("--gate", g)], "--json",
                                   "--run-dir", str(work / f"ours-{round_}")], work, env)
            assert done.returncode == 0, done.stderr[-2000:]
            ours.append(seconds)
            total = 0.0
            for index, line in enumerate(lm_eval_lines):
                argv = [a.replace("<run dir>", str(work / f"theirs-{round_}-{index}")) for a in shlex.split(line)]
                argv[0] = str(VENV_BIN / "lm_eval")
                seconds, done = timed(argv, work, env)
                assert done.returncode == 0, done.stderr[-2000:]
                total += seconds
            theirs.append(total)

    print(f"{'measure':<58}{'value':>14}")
    print(f"{'overhead: hfrelease eval on a running server, median s':<58}{statistics.median(ours):>14.2f}")
    print(f"{'overhead: lm_eval CLI, same gates and server, median s':<58}{statistics.median(theirs):>14.2f}")
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"{'overhead ratio (bar <= 1.05)':<58}{ratio:>14.3f}")
    if args.overhead_only:
        shutil.rmtree(work, ignore_errors=True)
        return
    print(f"{'cold run of the family, s (servers started)':<58}{cold_s:>10.1f} ({cold_report['servers_started']})")
    print(f"{'warm re-run, s (requests sent)':<58}{warm_s:>10.2f} ({warm_report['requests_sent']})")
    print(f"{'warm / cold (bar <= 0.02)':<58}{warm_s / cold_s:>14.4f}")
    print(f"{'weight bytes in the family (non-draft)':<58}{weight_bytes:>14,}")
    print(f"{'weight bytes read for hashes, cold run':<58}{cold_report['hash_bytes_read']:>14,}")
    print(f"{'weight bytes read for hashes, warm run':<58}{warm_report['hash_bytes_read']:>14,}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
