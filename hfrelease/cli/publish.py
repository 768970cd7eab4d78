"""`hfrelease bundle` and `hfrelease publish`: parse options, call `bundle_family` / `publish_family`, print."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from hfrelease.bundle import FamilyBundle
    from hfrelease.publish import PublishReport

_MANIFEST = click.argument("manifest", type=click.Path(path_type=Path), default=Path())
_ARTIFACT = click.option("--artifact", "artifacts", multiple=True, help="Only this artifact id (repeatable).")


def _hash_cache() -> Any:
    from hfrelease.cli.eval import cache_dir
    from hfrelease.ledger.hashing import HashCache

    # The cache `hfrelease eval` fills: weights hashed there are not read again here.
    return HashCache(cache_dir() / "hashes.json")


def _load(manifest: Path) -> Any:
    from hfrelease.manifest import find_manifest, load_manifest

    return load_manifest(find_manifest(manifest))


@click.command()
@_MANIFEST
@_ARTIFACT
@click.option("--out", type=click.Path(path_type=Path), help="Also write each repo's files under DIR/<artifact-id>/.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout.")
def bundle(manifest: Path, artifacts: tuple[str, ...], out: Path | None, as_json: bool) -> None:
    """Plan the files each repo will hold, with a MANIFEST of sha256 and size.

    Refuses (listing every case at once) credential files, pickle weights, links out of a directory,
    version-control and cache directories, and files nobody declared. Checks the vLLM plugin installs.
    """
    from hfrelease.bundle import bundle_family, write_bundle
    from hfrelease.cli.output import err_console

    cache = _hash_cache()
    result = bundle_family(_load(manifest), cache=cache, artifacts=artifacts)
    cache.save()
    if out is not None:
        for directory in write_bundle(result, out):
            err_console.print(f"wrote {directory}")
    _print_bundle(result, as_json=as_json)


def _bundle_data(result: FamilyBundle) -> dict[str, Any]:
    return {
        "family": result.family, "version": result.version, "tag": result.tag, "bytes_hashed": result.bytes_hashed,
        "repos": [{
            "artifact": r.artifact_id, "repo": r.repo, "weights_sha256": r.content_hash, "notes": list(r.notes),
            "plugin_entry_points": list(r.plugin.entry_points) if r.plugin else [],
            "files": [{"path": f.path, "role": f.role, "size": f.size, "sha256": f.sha256} for f in r.files],
        } for r in result.repos],
    }  # fmt: skip


def _print_bundle(result: FamilyBundle, *, as_json: bool) -> None:
    from hfrelease.cli.output import err_console, make_table, out_console, print_json

    if as_json:
        print_json(_bundle_data(result))
        return
    for repo in result.repos:
        table = make_table("path", "role", "bytes", "sha256", title=f"{repo.repo} ({repo.artifact_id}) @ {result.tag}")
        for item in repo.files:
            table.add_row(item.path, item.role, f"{item.size:,}", item.sha256[:16])
        out_console.print(table)
        for note in repo.notes:
            err_console.print(f"[yellow]note:[/] {note}", soft_wrap=True)


@click.command()
@_MANIFEST
@_ARTIFACT
@click.option("--hub", help="Hub endpoint URL, or `local` for the built-in Hub (default: [publish].endpoint).")
@click.option("--hub-root", type=click.Path(path_type=Path),
              help="State directory of `--hub local` (default: <family>/.hfrelease/hub).")  # fmt: skip
@click.option("--dry-run", is_flag=True, default=None,
              help="Show the plan per repo; push nothing (the default without a token).")  # fmt: skip
@click.option("--pr", is_flag=True, default=None, help="Stop after staging every repo as a pull request.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and outcome as JSON on stdout.")
@click.pass_context
def publish(
    ctx: click.Context, manifest: Path, artifacts: tuple[str, ...], hub: str | None, hub_root: Path | None,
    dry_run: bool | None, pr: bool | None, as_json: bool,
) -> None:  # fmt: skip
    """Push every repo of the family in one atomic, tagged commit each: all or nothing.

    Every repo is first staged (branch hfrelease/staging/<tag>, or a pull request with --pr) and verified;
    only then are mains committed and tagged. After a failure, re-running resumes.
    """
    from hfrelease.cli.output import err_console
    from hfrelease.publish import publish_family

    verbose = (ctx.obj or {}).get("verbose", 0)
    if verbose >= 2:
        import logging

        # huggingface_hub's debug log shows each request as a curl command, its token replaced by <TOKEN>.
        logging.getLogger("huggingface_hub").setLevel(logging.DEBUG)

    def echo(line: str) -> None:
        err_console.print(f"[dim]{line}[/]", soft_wrap=True, markup=True, highlight=False)

    cache = _hash_cache()
    report = publish_family(
        _load(manifest), hub=hub, hub_root=hub_root, dry_run=dry_run, pr=pr, artifacts=artifacts, cache=cache,
        echo=echo,
    )  # fmt: skip
    cache.save()
    _print_report(report, as_json=as_json, verbose=verbose)


def _report_data(report: PublishReport) -> dict[str, Any]:
    outcome = report.outcome
    return {
        "endpoint": report.endpoint, "tag": report.plan.tag, "dry_run": report.dry_run,
        "dry_run_reason": report.dry_run_reason, "token": report.token_source,
        "repos": [{
            "repo": r.repo, "artifact": r.bundle.artifact_id, "action": r.action, "tag_state": r.tag_state,
            "tag_commit": r.tag_commit, "main": r.main.commit if r.main else None,
            "added": [{"path": f.path, "size": f.size} for f in r.changes.added],
            "changed": [{"path": f.path, "size": f.size} for f in r.changes.changed],
            "deleted": list(r.changes.deleted), "unchanged": len(r.changes.unchanged),
            "bytes_to_send": r.changes.bytes_to_send, "card_diff": r.card_diff, "notes": list(r.bundle.notes),
        } for r in report.plan.repos],
        "outcome": None if outcome is None else {
            "status": outcome.status, "message": outcome.message,
            "repos": [{"repo": o.repo, "status": o.status, "commit": o.commit, "staged_ref": o.staged_ref}
                      for o in outcome.repos],
        },
    }  # fmt: skip


def _print_report(report: PublishReport, *, as_json: bool, verbose: int) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import err_console, make_table, out_console, print_json
    from hfrelease.redact import redact

    if as_json:
        print_json(_report_data(report))
        return
    title = f"{'plan' if report.dry_run else 'release'} {report.plan.tag} -> {report.endpoint}"
    table = make_table("repo", "action", "added", "changed", "deleted", "bytes to send", "tag", title=title)
    for r in report.plan.repos:
        changes = r.changes
        counts = (str(len(changes.added)), str(len(changes.changed)), str(len(changes.deleted)))
        table.add_row(r.repo, r.action, *counts, f"{changes.bytes_to_send:,}", f"{report.plan.tag} ({r.tag_state})")
    out_console.print(table)
    for r in report.plan.repos:
        for note in r.bundle.notes:
            err_console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
        if report.dry_run or verbose:
            for item in (*r.changes.added, *r.changes.changed):
                out_console.print(f"  {r.repo}: {'+' if item in r.changes.added else '~'} {escape(item.path)}",
                                  soft_wrap=True)  # fmt: skip
            for path in r.changes.deleted:
                out_console.print(f"  {r.repo}: - {escape(path)}", soft_wrap=True)
            if r.card_diff:
                out_console.print(escape(redact(r.card_diff)), soft_wrap=True, highlight=False)
    if report.dry_run:
        err_console.print(f"dry run ({escape(report.dry_run_reason or '')}): nothing was pushed", soft_wrap=True)
    elif report.outcome is not None:
        for o in report.outcome.repos:
            where = f" at {o.commit[:12]}" if o.commit else ""
            staged = f" ({o.staged_ref})" if o.staged_ref else ""
            out_console.print(f"{o.repo}: {o.status}{where}{staged}", soft_wrap=True)
        err_console.print(f"[bold green]{escape(report.outcome.message)}[/]", soft_wrap=True)
