"""`hfrelease bundle` and `hfrelease publish`: parse options, call their stages (`hfrelease.stages.publish`), print."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hfrelease.cli import options

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from hfrelease.cli.output import PlainConsole
    from hfrelease.publish.events import OnEvent, PublishEvent


@click.command()
@options.MANIFEST
@options.artifacts()
@click.option("--out", type=click.Path(path_type=Path, file_okay=False),
              help="Also write each repo's files under DIR/<artifact-id>/.")
@options.as_json("the plan")
def bundle(manifest: Path, artifacts: tuple[str, ...], out: Path | None, as_json: bool) -> None:
    """Plan the files each repo will hold, with a MANIFEST of sha256 and size.

    Every file goes through one allowlist; refuses (listing every case at once) files resolving outside the
    family directory or the artifact's source, credential files, pickles, tokens in any text file, binaries
    that are not weights, version-control and cache directories, and files nobody declared. Checks the vLLM
    plugin installs.
    """
    from hfrelease.cli.output import print_json, say, show
    from hfrelease.stages.publish import BundleSettings, bundle_stage
    from hfrelease.stages.publish_view import bundle_view

    report = bundle_stage(BundleSettings(manifest=manifest, artifacts=artifacts, out=out))
    for directory in report.written:
        say(f"wrote {directory}")
    print_json(report.as_dict()) if as_json else show(bundle_view(report))


@click.command()
@options.MANIFEST
@options.artifacts()
@options.HUB
@options.hub_root()
@click.option("--dry-run", is_flag=True, default=None,
              help="Show the plan per repo; push nothing (the default without a token).")  # fmt: skip
@click.option("--pr", is_flag=True, default=None, help="Stop after staging every repo as a pull request.")
@click.option("--allow-failed-gates", is_flag=True,
              help="Publish artifacts whose recorded gate results failed; their release commits name the gates.")
@options.as_json("the plan and outcome")
@click.pass_context
def publish(
    ctx: click.Context, manifest: Path, artifacts: tuple[str, ...], hub: str | None, hub_root: Path | None,
    dry_run: bool | None, pr: bool | None, allow_failed_gates: bool, as_json: bool,
) -> None:  # fmt: skip
    """Push every repo of the family in one atomic, tagged commit each: all or nothing.

    Every repo is first staged (branch hfrelease/staging/<tag>, or a pull request with --pr) and verified;
    only then are mains committed and tagged. After a failure, re-running resumes. An artifact whose
    recorded gate results failed is refused before anything is uploaded (exit 4), unless
    --allow-failed-gates.
    """
    from hfrelease.cli.output import echo, err_console, print_json, show
    from hfrelease.stages.publish import PublishSettings, publish_stage
    from hfrelease.stages.publish_view import publish_view

    verbose = (ctx.obj or {}).get("verbose", 0)
    if verbose >= 2:
        from hfrelease.hub_client import log_requests

        log_requests()
    settings = PublishSettings(manifest=manifest, artifacts=artifacts, hub=hub, hub_root=hub_root, dry_run=dry_run,
                               pr=pr, allow_failed_gates=allow_failed_gates)
    # Not with -vv: huggingface_hub's debug log would scroll through the live display.
    with release_progress(err_console, enabled=err_console.is_terminal and verbose < 2) as on_event:
        report = publish_stage(settings, echo=echo, on_event=on_event)
    print_json(report.as_dict()) if as_json else show(publish_view(report, verbose=verbose))


class ReleaseProgress:
    """A live Rich display of a release: one row per repo, its steps (stage -> verify -> promote -> tag) and
    the bytes staged so far (`stages.publish_view.PublishProgress`). Called with the core's events, from any
    thread."""

    def __init__(self, progress: Progress) -> None:
        from hfrelease.stages.publish_view import PublishProgress

        self.progress, self.state = progress, PublishProgress()
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, event: PublishEvent) -> None:
        from hfrelease.cli.output import markup

        change = self.state.update(event)
        if change is None:
            return
        description = markup(change.description) if change.description is not None else None
        if change.new:
            self.tasks[change.repo] = self.progress.add_task(description or "", repo=change.repo, total=change.total,
                                                             completed=0)
        elif (task := self.tasks.get(change.repo)) is not None:
            completed = self.progress.tasks[task].total if change.staged else change.completed
            self.progress.update(task, description=description, completed=completed)


@contextlib.contextmanager
def release_progress(console: PlainConsole, *, enabled: bool) -> Iterator[OnEvent | None]:
    """The live display's event handler while the block runs (None when disabled); huggingface_hub's own tqdm
    bars are off meanwhile (`hub_client.progress_bars_off`)."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from hfrelease.hub_client import progress_bars_off

    columns = (TextColumn("{task.fields[repo]}"), TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn())  # fmt: skip
    with progress_bars_off(), Progress(*columns, console=console) as progress:
        yield ReleaseProgress(progress)
