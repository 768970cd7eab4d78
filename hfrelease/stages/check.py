"""The check stage: each family manifest validated (load, serve guard, files), then preflighted or, with
`cards`, its rendered cards linted; every problem of every manifest reported in one go.

`check_stage(settings)` is what `hfrelease check` runs; `manifest_view` is what it prints of one manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrelease.errors import ConfigError, ConfigProblem, ExitCode, UsageError
from hfrelease.stages.view import Block, Styled, error_lines, line, note, table

if TYPE_CHECKING:
    from hfrelease.manifest import Gate, Manifest
    from hfrelease.stages.cards import LintReport


@dataclass(frozen=True, kw_only=True)
class CheckSettings:
    """What `hfrelease check` was asked to do (its options, parsed)."""

    manifests: tuple[Path, ...] = ()  # none: ./release.toml, else every model_cards/*/release.toml below cwd
    cards: bool = False  # lint the rendered cards instead of the preflight
    max_age_days: int | None = None
    since: str | None = None
    offline: bool = False  # preflight without asking the Hub
    preflight: bool = True


@dataclass(frozen=True, kw_only=True)
class ManifestCheck:
    """One manifest's result: its `--json` entry, the manifest when it loaded, what to say of it."""

    path: Path
    result: dict[str, Any]
    manifest: Manifest | None = None
    errors: tuple[tuple[str, str | None], ...] = ()  # (message, hint) per problem found
    notes: tuple[str, ...] = ()  # the preflight's
    linted: str | None = None  # with --cards: which cards were linted, and the outcome

    @property
    def ok(self) -> bool:
        return bool(self.result["ok"])


@dataclass(frozen=True, kw_only=True)
class CheckReport:
    checks: tuple[ManifestCheck, ...]

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if all(c.ok for c in self.checks) else ExitCode.CONFIG

    def as_dict(self) -> Any:
        """One manifest's result, or the list of them when several were checked."""
        results = [c.result for c in self.checks]
        return results if len(results) != 1 else results[0]


def _problems(problems: Sequence[ConfigProblem]) -> list[dict[str, Any]]:
    return [{"location": p.location, "message": p.message, "suggestion": p.suggestion} for p in problems]


def check_stage(settings: CheckSettings, *, announce: Callable[[str], None] | None = None,
                checked: Callable[[ManifestCheck], None] | None = None, quiet: bool = False) -> CheckReport:
    """Check every manifest of `settings`; `checked` is told of each as it is done, `announce` of what is
    worth knowing meanwhile (a local Hub started; unless `quiet`, serve args checked by their spelling only)."""
    from hfrelease.check import default_manifests

    paths = settings.manifests or tuple(default_manifests(Path.cwd()))
    if not paths:
        raise UsageError("no release.toml here and no model_cards/*/release.toml below: name a manifest",
                         hint="`hfrelease check path/to/release.toml` (or its directory).")
    checks = []
    for path in paths:
        check = _check_one(path, settings, announce=announce, quiet=quiet)
        if checked is not None:
            checked(check)
        checks.append(check)
    return CheckReport(checks=tuple(checks))


def _check_one(path: Path, settings: CheckSettings, *, announce: Callable[[str], None] | None,
               quiet: bool) -> ManifestCheck:
    from hfrelease.check import summarize
    from hfrelease.stages import cards

    try:
        manifest = _validated(path, announce=None if quiet else announce)
    except ConfigError as exc:
        # `hfrelease check` with no arguments in a fresh clone: the demo family names what `hfrelease demo
        # build` makes, which is not there yet. A note, not an error; a demo named on the command line, a
        # partial build or any other problem stays an error.
        unbuilt = None if settings.manifests else _unbuilt_demo(path, exc.problems)
        if unbuilt is not None:
            return unbuilt
        return ManifestCheck(path=path, result={"manifest": exc.source, "ok": False,
                                                "problems": _problems(exc.problems)}, errors=((exc.message, exc.hint),))
    summary, errors = summarize(manifest), list[tuple[str, str | None]]()
    notes: tuple[str, ...] = ()
    linted = None
    # --cards lints what render made after eval (the render job, or after a publish): the preflight is
    # about what happens before eval, and its tag check would fail once the release is out.
    if settings.preflight and not settings.cards:
        from hfrelease.files.cache import cache_dir
        from hfrelease.preflight import run_preflight

        report = run_preflight(manifest, cache_dir=cache_dir(), hub=not settings.offline)
        summary["preflight"] = {"seconds": round(report.seconds, 3), "notes": list(report.notes)}
        notes = report.notes
        if report.problems:
            summary["problems"] = _problems(report.problems)
            error = ConfigError(f"{path} (preflight)", report.problems)
            errors.append((error.message, error.hint))
    if settings.cards:
        lint = cards.lint_stage(manifest, cards.LintSettings(max_age_days=settings.max_age_days, since=settings.since),
                                announce=announce)
        summary["cards"] = lint.as_dict()
        linted = _linted(manifest, lint)
        if lint.problems:
            errors.append(("cards of " + manifest.family.name + " are not fit to publish:\n"
                           + "\n".join(f"  - {p}" for p in summary["cards"]["problems"]),
                           lint.hint()))
    return ManifestCheck(path=path, result={"manifest": str(path), "ok": not errors, **summary}, manifest=manifest,
                         errors=tuple(errors), notes=tuple(notes), linted=linted)


def _unbuilt_demo(path: Path, problems: Sequence[ConfigProblem]) -> ManifestCheck | None:
    from hfrelease.check import summarize
    from hfrelease.demo.paths import unbuilt_demo_note
    from hfrelease.manifest import load_manifest

    said = unbuilt_demo_note(path, problems)
    if said is None:
        return None
    manifest = load_manifest(path, check_files=False)
    return ManifestCheck(path=path, result={"manifest": str(path), "ok": True, **summarize(manifest), "notes": [said]},
                         manifest=manifest, notes=(said,))


def release_check(path: Path) -> tuple[Manifest, tuple[str, ...]]:
    """What `hfrelease check` checks of one manifest, its preflight and the release tag's lookup on the Hub
    included; a ConfigError names every problem. The release workflow's check job runs exactly this, before any
    GPU job. Returns the manifest and the preflight's notes."""
    from hfrelease.files.cache import cache_dir
    from hfrelease.manifest import find_manifest
    from hfrelease.preflight import run_preflight

    manifest = _validated(path, announce=None)
    report = run_preflight(manifest, cache_dir=cache_dir(), hub=True)
    if report.problems:
        raise ConfigError(f"{find_manifest(path)} (preflight)", report.problems)
    return manifest, report.notes


def _linted(manifest: Manifest, lint: LintReport) -> str:
    """What `check --cards` linted: how many of the family's cards, which, and how it came out."""
    names = ", ".join(str(p.relative_to(manifest.root)) if p.is_relative_to(manifest.root) else str(p)
                      for p in lint.cards)
    count, problems = len(lint.cards), len(lint.problems)
    outcome = f"{problems} problem{'s' if problems != 1 else ''} (above)" if problems else "no problem"
    return (f"linted {count} of {len(manifest.artifact)} card{'s' if len(manifest.artifact) != 1 else ''} of "
            f"{manifest.family.name} against its ledger{f' ({names})' if names else ''}: {outcome}")


def _validated(path: Path, *, announce: Callable[[str], None] | None) -> Manifest:
    """The loaded manifest, or a ConfigError with every problem: the load's, then the serve guard's and the
    files' (what `bundle` would refuse, what a render would quote) together."""
    from hfrelease.check import tree_problems
    from hfrelease.manifest import find_manifest, load_manifest
    from hfrelease.serving.guard import manifest_problems
    from hfrelease.serving.spec_methods import speculative_notes, speculative_problems

    manifest = load_manifest(path)
    source = str(find_manifest(path))
    # vLLM's own parser reads every artifact's serve command (a problem where the args change what hfrelease
    # owns); without vLLM installed here, the spelling-level check of the load is all there is.
    serve_problems = manifest_problems(manifest)
    if serve_problems is None and announce is not None:
        announce(f"note: {source}: vLLM is not installed here, so serve args were checked by their spelling only; "
                 "every server start parses them with vLLM's own parser first")
    # [[speculative]] methods as the installed vLLM's own SpeculativeConfig knows them (a fallback list without it).
    if announce is not None:
        for text in speculative_notes(manifest):
            announce(f"note: {source}: {text}")
    problems = [*(serve_problems or ()), *speculative_problems(manifest), *tree_problems(manifest)]
    if problems:
        raise ConfigError(source, problems)
    return manifest


def valid_view(report: CheckReport) -> list[Block]:
    """The closing line when every manifest is valid (nothing otherwise: each problem is said already)."""
    count = len(report.checks)
    return [] if report.exit_code else [line(Styled("✓", "green"), f" {count} manifest{'s' if count != 1 else ''} "
                                             "valid", err=True, wrap=True)]


def manifest_view(check: ManifestCheck) -> list[Block]:
    """What `check` prints of one manifest: its problems and notes, then what it declares."""
    view: list[Block] = [block for message, hint in check.errors for block in error_lines(message, hint)]
    view += [note(text) for text in check.notes]
    if check.linted is not None:
        view.append(line(Styled("cards:", "bold"), f" {check.linted}", err=True, wrap=True))
    return view + (_declared(check.manifest, check.path) if check.manifest is not None else [])


def _declared(manifest: Manifest, path: Path) -> list[Block]:
    """The family's artifacts, gates and workloads as tables (manifest strings printed as written)."""
    family = manifest.family
    view: list[Block] = [line(Styled(family.display_name, "bold"), f" ({family.name} v{family.version}) — {path} — "
                              f"base {family.base_model}, tag {manifest.tag_name()}", wrap=True)]
    rows = []
    for a in manifest.artifact:
        source = a.source.path if a.source.path else f"{a.source.hub}@{(a.source.revision or '')[:10]}"
        if a.quantization:
            details = f"{a.quantization.scheme} ({a.quantization.tool} {a.quantization.tool_version})"
        elif a.draft:
            details = f"{a.draft.method} k={a.draft.num_speculative_tokens} → {a.draft.target}"
        else:
            details = ""
        rows.append((a.id, a.kind, a.repo + ("" if a.publish else " (not published)"), str(source), details))
    view.append(table("Artifacts", ("artifact", "kind", "repo", "source", "details"), rows))
    if manifest.gate:
        view.append(table("Gates", ("gate", "harness", "mode", "n", "budget", "metric", "margin"), [
            (g.id, g.task or (" ".join(g.command) if g.command else g.entry_point) or f"fidelity {g.fidelity}",
             g.mode, str(g.limit or "all"), str(g.max_tokens), g.metric, _threshold(g)) for g in manifest.gate]))
    if manifest.workload:
        view.append(table("Workloads", ("workload", "prompts", "out", "thinking", "concurrency", "speculative"), [
            (w.id, str(w.prompts), f"{w.output_len}{' exactly' if w.ignore_eos else ''}", "on" if w.thinking else "off",
             ",".join(map(str, w.concurrency)), ",".join(w.speculative)) for w in manifest.workload]))
    return view


def _threshold(gate: Gate) -> str:
    """The gate's pass line as the table shows it: -margin, or a fidelity gate's maxima."""
    if not gate.is_fidelity:
        return f"-{gate.margin:g}"
    limits = [f"kl<={gate.max_kl:g}" if gate.max_kl is not None else "",
              f"flips<={gate.max_flip_rate:g}" if gate.max_flip_rate is not None else ""]
    return " ".join(x for x in limits if x)
