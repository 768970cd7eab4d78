"""`hfrelease eval` costs, as ratios measured side by side in one run on the demo family.

    .venv/bin/python benchmarks/eval.py [--rounds 3]

1. Orchestration overhead: `hfrelease eval --endpoint` of the reference's gate set on an already-started
   vLLM server ÷ lm-eval's own CLI run with the same settings (the commands `--dry-run` prints) against
   the same server, interleaved over rounds; medians. Bar: ≤ 1.05.
2. Warm re-run of the fully recorded family ÷ the cold run that recorded it. Bar: ≤ 0.02, zero requests.
3. Hashing: weight bytes read for content hashes by the cold run (at most 1x the family's weight bytes) and
   by the warm run (0).

    .venv/bin/python benchmarks/eval.py --schedule [--rounds 2] [--sweep 1,2,4,8,16,32]

4. Concurrent against sequential gates, side by side on one server (the demo's fp8-dynamic, whose gates are
   judged against the reference): first the artifact's concurrency sweep (`eval --speed-only`, the `load`
   workload at the `--sweep` levels) and the reference's gates are recorded; then, on one fp8-dynamic server
   started with the gate server's own command, its four gates run one after another (each at its own
   num_concurrent) and all at once (sharing the budget the sweep's knee gives), the order alternating per
   round. Printed: wall time of each (first gate's start to last gate's end), their ratio (bar <= 0.6), each
   run's utilization (generated tok/s over the sweep's throughput at its in-flight level; bar >= 0.90 for the
   concurrent run), the server's busy share and mean batch, the CPU seconds of hfrelease with its gate
   processes and commands and of the server, the machine's busy share of its cores (every tenant's work: a
   share near 1 means the run is CPU-bound), the verdicts of both (must agree) and how many samples answered
   differently between the two schedules, per gate. Round 0 is a warm-up (what a process pays once: lm-eval's
   import and task index, the gate processes' forkserver); the medians are over the later rounds.
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
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
GATES = ["arith", "arith-nothink", "mc"]


def family_copy(base: Path) -> Path:
    """The demo family under `base`, with an empty ledger, pinned to this machine's demo build."""
    from hfrelease.demo.vendor import pin_manifest, read_pins

    family = base / "model_cards" / "demo"
    shutil.copytree(ROOT / "model_cards" / "demo", family, ignore=shutil.ignore_patterns("results", "*.egg-info"))
    (family / "results").mkdir()
    (base / "build").symlink_to(ROOT / "build")
    pin_manifest(family / "release.toml", read_pins(ROOT / "build" / "demo"))
    return family


def pinned_demo_hub(work: Path) -> dict[str, str]:
    """The demo build's Hub served (`demo_hub`), and the environment every hfrelease run here gets."""
    from demo_hub import serve_demo_hub

    os.environ["HFRELEASE_CACHE"] = str(work / "cache")
    serve_demo_hub(work)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main() -> None:  # noqa: PLR0915 - one linear script: measure, then print
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overhead-only", action="store_true", help="skip the cold/warm family runs")
    parser.add_argument("--schedule", action="store_true", help="only concurrent against sequential gates")
    parser.add_argument("--sweep", default="1,2,4,8,16,32", help="concurrency levels of the sweep (--schedule)")
    args = parser.parse_args()
    if args.schedule:
        schedule_benchmark(rounds=args.rounds, levels=[int(c) for c in args.sweep.split(",")])
        return

    from hfrelease.evaluation.plan import describe_gate, model_files, plan_eval
    from hfrelease.files.hashing import weight_files
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.serving.command import build_serve_command
    from hfrelease.serving.plugin import ensure_plugin
    from hfrelease.serving.process import VllmServer, free_port

    work = Path(tempfile.mkdtemp(prefix="hfrelease-bench-eval-"))
    env = pinned_demo_hub(work)
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


ARTIFACT = "fp8-dynamic"


class CpuWatch:
    """CPU seconds while a block runs: of this process's tree (hfrelease, its gate processes and custom gate
    commands), of the server's processes, and the machine's busy share of all its cores (/proc/stat)."""

    def __init__(self, server_pid: int) -> None:
        import threading

        import psutil

        self._psutil = psutil
        self._server = psutil.Process(server_pid)
        self._seen: dict[int, float] = {}  # pid -> its CPU seconds when last read
        self._start: dict[int, float] = {}  # pid -> CPU seconds when first read (0 for processes started since)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self.client_s = self.server_s = self.machine_busy = 0.0

    @staticmethod
    def _stat() -> tuple[float, float]:
        fields = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    def _tree(self, root: object, *, new_from_zero: bool) -> float:
        total = 0.0
        try:
            processes = [root, *root.children(recursive=True)]  # type: ignore[attr-defined]
        except self._psutil.Error:
            return 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except self._psutil.Error:
                continue
            value = times.user + times.system
            if process.pid not in self._start:
                self._start[process.pid] = 0.0 if new_from_zero else value
            self._seen[process.pid] = value
            total += value
        return total

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            self._tree(self._psutil.Process(), new_from_zero=True)

    def __enter__(self) -> CpuWatch:
        self._machine = self._stat()
        self._server_start = self._tree(self._server, new_from_zero=False)
        self._own = set(self._start)
        self._tree(self._psutil.Process(), new_from_zero=False)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        server_end = self._tree(self._server, new_from_zero=False)
        self._tree(self._psutil.Process(), new_from_zero=True)
        server_pids = {p.pid for p in [self._server, *self._server.children(recursive=True)]}
        self.server_s = server_end - self._server_start
        self.client_s = sum(self._seen[pid] - self._start[pid] for pid in self._seen if pid not in server_pids)
        busy, total = self._stat()
        self.machine_busy = (busy - self._machine[0]) / max(total - self._machine[1], 1.0)


def schedule_benchmark(*, rounds: int, levels: list[int]) -> None:  # noqa: PLR0915 - one linear script
    import dataclasses

    import tomli_w

    from hfrelease.evaluation.plan import plan_eval, serve_command
    from hfrelease.evaluation.runner import EvalReport, run_eval
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest
    from hfrelease.serving.plugin import ensure_plugin
    from hfrelease.serving.process import VllmServer, free_port

    work = Path(tempfile.mkdtemp(prefix="hfrelease-bench-schedule-"))
    env = pinned_demo_hub(work)
    family = family_copy(work)
    data = tomllib.loads((family / "release.toml").read_text())
    data["workload"] = [{**w, "concurrency": levels} for w in data["workload"] if w["id"] == "load"]
    (family / "release.toml").write_text(tomli_w.dumps(data))
    hfrelease = [str(VENV_BIN / "python"), "-m", "hfrelease"]
    started = time.perf_counter()
    # The artifact's sweep and the reference's gates, recorded the ordinary way.
    for argv in (["eval", str(family), "--speed-only", "--artifact", ARTIFACT, "--workload", "load"],
                 ["eval", str(family), "--artifact", "reference"]):
        seconds, done = timed([*hfrelease, *argv, "--run-dir", str(work / argv[-1])], work, env)
        if done.returncode not in (0, 4):
            sys.exit(f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        print(f"# {shlex.join(argv[2:])}: {seconds:.0f} s", flush=True)
    manifest = load_manifest(family)
    recorded = Ledger(family / "results")
    plan = plan_eval(manifest, ledger=recorded, hash_cache=None, artifacts=[ARTIFACT], force=True)
    # The artifact's own job: with force=True the plan also re-serves the reference for the fidelity gates
    # (their reference record is planned again), a job this benchmark does not time.
    job = next(j for j in plan.servers if j.artifact.id == ARTIFACT)
    assert job.in_flight is not None
    print(f"# in flight: {job.in_flight.value} ({job.in_flight.reason})", flush=True)
    schedules = {"sequential": dataclasses.replace(job, in_flight=None), "concurrent": job}
    port = free_port()
    command = serve_command(manifest, job, port=port, vllm=str(VENV_BIN / "vllm"))
    if command.plugin:
        ensure_plugin(manifest.resolve(command.plugin))
    reports: dict[str, list[EvalReport]] = {"sequential": [], "concurrent": []}
    cpu: dict[str, list[CpuWatch]] = {"sequential": [], "concurrent": []}
    with VllmServer(command, log_path=work / "server.log", port=port) as server:
        server.wait_until_ready()
        for round_ in range(rounds):
            order = ["sequential", "concurrent"] if round_ % 2 == 0 else ["concurrent", "sequential"]
            for name in order:
                ledger_root = work / f"{name}-{round_}"
                shutil.copytree(family / "results", ledger_root)  # the reference's records, to judge against
                assert server.pid is not None
                with CpuWatch(server.pid) as watch:
                    report = run_eval(dataclasses.replace(plan, servers=(schedules[name],)),
                                      ledger=Ledger(ledger_root), run_dir=work / f"run-{name}-{round_}",
                                      endpoint=server.endpoint.base_url)
                reports[name].append(report)
                cpu[name].append(watch)
                load = report.loads[0]
                durations = {r.subject_id: r.duration_s for r in Ledger(ledger_root).records(artifact_id=ARTIFACT)}
                print(f"# round {round_} {name}: {load.summary()}; CPU s: hfrelease and its gates "
                      f"{watch.client_s:.1f}, server {watch.server_s:.1f}; machine busy {watch.machine_busy:.0%}; "
                      f"gate s {durations}", flush=True)
    print(f"# benchmark wall time {time.perf_counter() - started:.0f} s")
    # Round 0 warms up what a process pays once (lm-eval's import and task index, the forkserver): medians
    # are over the later rounds, as a family's eval pays it once for all its artifacts.
    timed_reports = {name: runs[1:] or runs for name, runs in reports.items()}
    timed_cpu = {name: runs[1:] or runs for name, runs in cpu.items()}
    print(f"{'measure':<64}{'sequential':>14}{'concurrent':>14}")
    walls = {name: statistics.median(r.loads[0].wall_s for r in runs) for name, runs in timed_reports.items()}
    print(f"{'gates wall time, median s':<64}{walls['sequential']:>14.1f}{walls['concurrent']:>14.1f}")
    for label, pick in (("generated tok/s", lambda u: u.tokens_per_s),
                        ("utilization (tok/s / sweep at its in-flight level)", lambda u: u.ratio or 0.0),
                        ("server busy share (running > 0)", lambda u: u.busy_share or 0.0),
                        ("mean batch (request-seconds per second)", lambda u: u.mean_batch)):
        values = {name: statistics.median(pick(r.loads[0].utilization) for r in runs if r.loads[0].utilization)
                  for name, runs in timed_reports.items()}
        print(f"{label + ', median':<64}{values['sequential']:>14.3f}{values['concurrent']:>14.3f}")
    for label, pick_cpu in (("CPU s of hfrelease, its gate processes and commands", lambda w: w.client_s),
                            ("CPU s of the vLLM server's processes", lambda w: w.server_s),
                            ("machine's busy share of its cores (all tenants)", lambda w: w.machine_busy)):
        values = {name: statistics.median(pick_cpu(w) for w in runs) for name, runs in timed_cpu.items()}
        print(f"{label + ', median':<64}{values['sequential']:>14.3f}{values['concurrent']:>14.3f}")
    in_flight = {name: runs[0].loads[0].in_flight.value for name, runs in reports.items()}
    print(f"{'in flight (sweep level the utilization is against)':<64}{in_flight['sequential']:>14}"
          f"{in_flight['concurrent']:>14}")
    print(f"{'wall-time ratio concurrent / sequential (bar <= 0.6)':<64}"
          f"{walls['concurrent'] / walls['sequential']:>28.3f}")
    verdicts = {name: [{row.gate_id: row.verdict for row in r.rows if row.artifact_id == ARTIFACT} for r in runs]
                for name, runs in reports.items()}
    same = all(v == verdicts["sequential"][0] for runs in verdicts.values() for v in runs)
    print(f"verdicts: sequential {verdicts['sequential'][0]}, concurrent {verdicts['concurrent'][0]}; "
          f"{'the same in every run' if same else 'DIFFERENT'}")
    for gate in [g.gate.id for g in job.gates]:
        first = _responses(work / "sequential-0", gate)
        for name, runs in reports.items():
            for round_ in range(len(runs)):
                other = _responses(work / f"{name}-{round_}", gate)
                differ = sum(1 for doc, answer in first.items() if other.get(doc) != answer)
                print(f"{gate}: {name} round {round_}: {differ} of {len(first)} samples answered differently "
                      "from sequential round 0")
    shutil.rmtree(work, ignore_errors=True)


def _responses(ledger_root: Path, gate: str) -> dict[tuple[str, str], tuple[str | None, float]]:
    """Per sample of `gate`'s records on the artifact (one per seed for a seeded gate): response and score."""
    from hfrelease.ledger.store import Ledger

    ledger = Ledger(ledger_root)
    records = ledger.records(artifact_id=ARTIFACT, subject_id=gate, kind="gate")
    if not records:
        sys.exit(f"{ledger_root}: no record of gate {gate!r} on {ARTIFACT}")
    return {(str(r.seed), s.doc_id): (s.response, s.score)
            for r in records for s in ledger.load_samples(r)}


if __name__ == "__main__":
    main()
