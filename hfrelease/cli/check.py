"""`hfrelease check`: validate one or more family manifests and show what they declare."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hfrelease.errors import ConfigError, ConfigProblem, ExitCode

if TYPE_CHECKING:
    from hfrelease.manifest import Gate, Manifest


@click.command()
@click.argument("manifests", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--cards", is_flag=True, help="Also lint the rendered model cards against the ledger.")
@click.option("--since", help="With --cards: the cards were rendered with `render --since SINCE`; their "
              "'Changes since' numbers are re-derived from that comparison.")
@click.option("--max-age-days", type=click.IntRange(min=0), help="With --cards: fail when a card's numbers are older.")
@click.option("--offline", is_flag=True, help="Preflight without asking the Hub (revisions, release tags, Hub chat "
              "templates are not checked).")
@click.option("--no-preflight", "no_preflight", is_flag=True,
              help="Only validate the manifest: skip the preflight (lm-eval tasks and metrics, chat templates, "
                   "plugins, Hub revisions and tags, workflow install lines).")
def check(manifests: tuple[Path, ...], as_json: bool, cards: bool, max_age_days: int | None, offline: bool = False,
          no_preflight: bool = False, since: str | None = None) -> None:
    """Validate family manifests (release.toml files or their directories), then preflight them.

    With no argument: ./release.toml, or else every model_cards/*/release.toml below the current directory.
    Every file a bundle would ship (declared files, checkpoints, cards, ledger, plugin) and every section a
    card quotes is judged as `hfrelease bundle` judges it: inside the family tree, no secret, no pickle.
    The preflight finds before any GPU time what would fail on a runner: each gate's lm-eval task, metric
    and filter exist and its task fits its api; a thinking gate's chat template takes the thinking switch;
    every plugin directory is a package; Hub revisions exist and the release tag is not taken yet; the
    repository's workflows install hfrelease from somewhere that resolves. With --cards, the rendered cards
    are linted instead of the preflight.
    Every problem is reported at once, each with its place in the file; exit code 3 when any is found.
    """
    from rich.markup import escape

    from hfrelease.check import default_manifests, summarize
    from hfrelease.cli.output import err_console, print_error, print_json
    from hfrelease.preflight import run_preflight
    from hfrelease.stages.cards import LintSettings, lint_stage
    from hfrelease.stages.runner import cache_dir

    paths = list(manifests) or default_manifests(Path.cwd())
    if not paths:
        raise click.UsageError("no release.toml here and no model_cards/*/release.toml below: name a manifest")
    results: list[dict[str, Any]] = []
    failed = 0
    for path in paths:
        try:
            manifest = _validated(path, quiet=as_json)
        except ConfigError as exc:
            failed += 1
            results.append(
                {
                    "manifest": exc.source,
                    "ok": False,
                    "problems": [
                        {"location": p.location, "message": p.message, "suggestion": p.suggestion}
                        for p in exc.problems
                    ],
                }
            )
            if not as_json:
                print_error(exc.message, hint=exc.hint)
            continue
        summary = summarize(manifest)
        ok = True
        # --cards lints what render made after eval (the render job, or after a publish): the preflight is
        # about what happens before eval, and its tag check would fail once the release is out.
        if not (no_preflight or cards):
            report = run_preflight(manifest, cache_dir=cache_dir(), hub=not offline)
            summary["preflight"] = {"seconds": round(report.seconds, 3), "notes": list(report.notes)}
            if report.problems:
                ok = False
                summary["problems"] = [
                    {"location": p.location, "message": p.message, "suggestion": p.suggestion} for p in report.problems
                ]
                if not as_json:
                    error = ConfigError(f"{path} (preflight)", report.problems)
                    print_error(error.message, hint=error.hint)
            if not as_json:
                for note in report.notes:
                    err_console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
        if cards:
            summary["cards"] = lint_stage(manifest, LintSettings(max_age_days=max_age_days, since=since),
                                          announce=err_console.print).as_dict()
            if summary["cards"]["problems"]:
                ok = False
                if not as_json:
                    print_error("cards of " + manifest.family.name + " are not fit to publish:\n"
                                + "\n".join(f"  - {p}" for p in summary["cards"]["problems"]),
                                hint="Re-render with `hfrelease render` (never edit numbers by hand).")
        failed += not ok
        results.append({"manifest": str(path), "ok": ok, **summary})
        if not as_json:
            _show(manifest, path)
    if as_json:
        print_json(results if len(results) != 1 else results[0])
    elif failed == 0:
        err_console.print(f"[green]✓[/] {len(paths)} manifest{'s' if len(paths) != 1 else ''} valid")
    if failed:
        click.get_current_context().exit(int(ExitCode.CONFIG))


def _validated(path: Path, *, quiet: bool) -> Manifest:
    """The loaded manifest, or a ConfigError with every problem: the load's, then the serve guard's and the
    files' (what `bundle` would refuse, what a render would quote) together."""
    from hfrelease.check import tree_problems
    from hfrelease.manifest import find_manifest, load_manifest

    manifest = load_manifest(path)
    source = str(find_manifest(path))
    problems = [*_serve_arg_problems(manifest, source=source, quiet=quiet), *tree_problems(manifest)]
    if problems:
        raise ConfigError(source, problems)
    return manifest


def _serve_arg_problems(manifest: Manifest, *, source: str, quiet: bool) -> list[ConfigProblem]:
    """vLLM's own parser reads every artifact's serve command (a problem where the args change what
    hfrelease owns); without vLLM installed here, the spelling-level check of the load is all there is."""
    from hfrelease.cli.output import err_console
    from hfrelease.serving.guard import manifest_problems

    problems = manifest_problems(manifest)
    if problems is None and not quiet:
        err_console.print(
            f"note: {source}: vLLM is not installed here, so serve args were checked by their spelling only; "
            "every server start parses them with vLLM's own parser first", markup=False, highlight=False,
        )
    return list(problems or ())


def _show(manifest: Manifest, path: Path) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import make_table, out_console

    # Manifest strings are text, never Rich markup: `[bold]` in a display name prints as written.
    e = escape

    family = manifest.family
    out_console.print(
        f"[bold]{e(family.display_name)}[/] ({family.name} v{e(family.version)}) — {e(str(path))} — "
        f"base {family.base_model}, tag {e(manifest.tag_name())}"
    )
    artifacts = make_table("artifact", "kind", "repo", "source", "details", title="Artifacts")
    for a in manifest.artifact:
        source = a.source.path if a.source.path else f"{a.source.hub}@{(a.source.revision or '')[:10]}"
        if a.quantization:
            details = f"{a.quantization.scheme} ({a.quantization.tool} {a.quantization.tool_version})"
        elif a.draft:
            details = f"{a.draft.method} k={a.draft.num_speculative_tokens} → {a.draft.target}"
        else:
            details = ""
        artifacts.add_row(a.id, a.kind, a.repo + ("" if a.publish else " (not published)"), e(source), e(details))
    out_console.print(artifacts)
    if manifest.gate:
        gates = make_table("gate", "harness", "mode", "n", "budget", "metric", "margin", title="Gates")
        for g in manifest.gate:
            harness = g.task or (" ".join(g.command) if g.command else g.entry_point) or f"fidelity {g.fidelity}"
            gates.add_row(
                g.id, e(harness), g.mode, str(g.limit or "all"), str(g.max_tokens), e(g.metric), _threshold(g)
            )
        out_console.print(gates)
    if manifest.workload:
        loads = make_table(
            "workload", "prompts", "out", "thinking", "concurrency", "speculative", title="Workloads"
        )
        for w in manifest.workload:
            loads.add_row(
                w.id, e(w.prompts), f"{w.output_len}{' exactly' if w.ignore_eos else ''}",
                "on" if w.thinking else "off",
                ",".join(map(str, w.concurrency)), ",".join(w.speculative),
            )
        out_console.print(loads)


def _threshold(gate: Gate) -> str:
    """The gate's pass line as the table shows it: -margin, or a fidelity gate's maxima."""
    if not gate.is_fidelity:
        return f"-{gate.margin:g}"
    limits = [f"kl<={gate.max_kl:g}" if gate.max_kl is not None else "",
              f"flips<={gate.max_flip_rate:g}" if gate.max_flip_rate is not None else ""]
    return " ".join(x for x in limits if x)
