"""The `--dry-run` documents of the eval stage: every command as the runners would run it, as data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfrelease.evaluation.plan import EvalPlan
    from hfrelease.serving.command import ServeCommand
    from hfrelease.speed.plan import SpeedPlan

_BASE = "http://127.0.0.1:<port>"


def port_placeholder(argv: Sequence[str]) -> list[str]:
    """`argv` built with port 0, the value of `--port` shown as `<port>` (the runner picks a free one)."""
    return [("<port>" if word == "0" and i and argv[i - 1] == "--port" else word) for i, word in enumerate(argv)]


def display_with_port(command: ServeCommand) -> str:
    return replace(command, argv=tuple(port_placeholder(command.argv))).display()


def gate_plan_dict(plan: EvalPlan) -> dict[str, Any]:
    """The gate plan: per server its `vllm serve` command and each gate's command, recorded or to run."""
    from hfrelease.evaluation.plan import describe_gate, model_files, serve_command

    servers: list[dict[str, Any]] = []
    for job in plan.servers:
        # The runner's own command builders, with placeholders for what only exists at run time.
        command = serve_command(plan.manifest, job, port=0)
        files = model_files(job.artifact, job.model_dir)
        servers.append({
            "artifact": job.artifact.id,
            "serve": display_with_port(command),
            "argv": port_placeholder(command.argv),
            "plugin": command.plugin,
            "unknown": job.unknown,
            # The requests its gates keep in flight together, and where the figure comes from (None: one at a time).
            "in_flight": job.in_flight.as_dict() if job.in_flight is not None else None,
            "gates": [
                {"gate": g.label, "cached": not g.pending, "input_key": g.input_key or None,
                 "command": describe_gate(plan.manifest, g, base_url=_BASE, model=job.artifact.repo, files=files,
                                          num_concurrent=job.num_concurrent(g.gate))}
                for g in job.gates
            ],
        })
    return {"family": plan.manifest.family.name, "pending": plan.pending, "servers": servers}


def speed_plan_dict(plan: SpeedPlan, gate_servers: frozenset[str] = frozenset(),
                    sweeps_first: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The speed plan: per (artifact, config) server its command and each point's benchmark commands.

    `gate_servers`: artifacts whose gate server starts anyway; their no-speculation points run on it, after
    the gates, or before them for the artifacts in `sweeps_first` (their concurrency sweep sets the budget).
    """
    from hfrelease.speed import bench
    from hfrelease.speed.runner import serve_command
    from hfrelease.speed.steps import point_steps

    servers: list[dict[str, Any]] = []
    for job in plan.servers:
        points = []
        for point in job.points:
            steps = point_steps(plan, job, point, base_url=_BASE, run_dir=Path("<run dir>"))
            points.append({"workload": point.workload.id, "concurrency": point.concurrency,
                           "input_len": point.input_len,
                           "repeats": point.workload.repeats, "warmups": point.workload.warmups,
                           "cached": not point.pending, "input_key": point.input_key or None,
                           "commands": [bench.display(step.argv) for step in steps]})
        command = serve_command(plan, job, port=0)
        servers.append({"artifact": job.artifact.id, "speculative": job.spec_id,
                        "draft": job.draft.id if job.draft else None, "serve": display_with_port(command),
                        "argv": port_placeholder(command.argv), "plugin": job.public.plugin, "points": points,
                        "unknown": job.unknown,
                        "on_gate_server": job.speculative is None and job.artifact.id in gate_servers,
                        "before_gates": job.speculative is None and job.artifact.id in sweeps_first})
    return {"family": plan.manifest.family.name, "pending": plan.pending, "servers": servers}
