"""Progress of a release: the core's structured events, and the CLI's Rich display drawn from them."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.utils import are_progress_bars_disabled  # type: ignore[attr-defined]

from hfrelease.cli.output import err_console
from hfrelease.cli.publish import release_progress
from hfrelease.hub import FaultRule, HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from hfrelease.publish.events import BytesSent, PublishEvent, RepoPlanned, StepDone, StepStarted
from tests.publish_family import fake_plugin_check, make_family


def _steps(events: list[PublishEvent], repo: str) -> list[str]:
    return [f"{type(e).__name__}:{e.step}" for e in events
            if isinstance(e, StepStarted | StepDone) and e.repo == repo]  # fmt: skip


def test_events_follow_each_repo_through_every_step(tmp_path: Path, api: HfApi, hub: HubServer) -> None:
    """Per repo: planned, then stage, verify, promote, tag in order; bytes sent reach each weight file's size."""
    family = make_family(tmp_path / "f", weight_bytes=9 * 1024 * 1024)  # above the 4 MiB reporting step
    hub.faults.add(FaultRule(endpoint="lfs-upload", status=500, times=1))  # a retried PUT starts again from 0
    seen: list[PublishEvent] = []
    lock = threading.Lock()

    def on_event(event: PublishEvent) -> None:
        with lock:  # BytesSent comes from huggingface_hub's upload threads
            seen.append(event)

    report = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, on_event=on_event)
    assert report.outcome is not None and report.outcome.status == "published"
    for plan in report.plan.repos:
        planned = [e for e in seen if isinstance(e, RepoPlanned) and e.repo == plan.repo]
        assert planned == [RepoPlanned(repo=plan.repo, bytes_to_send=plan.changes.bytes_to_send, released=False)]
        assert _steps(seen, plan.repo) == [f"{kind}:{step}" for step in ("stage", "verify", "promote", "tag")
                                           for kind in ("StepStarted", "StepDone")]  # fmt: skip
        sent = [e for e in seen if isinstance(e, BytesSent) and e.repo == plan.repo]
        last = {e.path: e.sent for e in sent}  # each file's final count (a retry restarts it)
        # Every file read from disk reports (MANIFEST is generated in memory), each up to its full size.
        assert last == {f.path: f.size for f in plan.bundle.files if f.source is not None}
        assert len([e for e in sent if e.path == "model.safetensors"]) >= 3  # 9 MiB in 4 MiB steps
        tag = next(e for e in seen if isinstance(e, StepDone) and e.repo == plan.repo and e.step == "tag")
        assert tag.detail == "v1.0" and tag.commit == next(o.commit for o in report.outcome.repos
                                                           if o.repo == plan.repo)  # fmt: skip
    retried = [e.sent for e in seen if isinstance(e, BytesSent)]
    assert any(later < earlier for earlier, later in itertools.pairwise(retried))


def test_republish_reports_every_repo_as_released(family: Path, api: HfApi) -> None:
    """A no-op re-publish plans each repo as released and runs no step."""
    publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check)
    seen: list[PublishEvent] = []
    publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, on_event=seen.append)
    assert seen and all(isinstance(e, RepoPlanned) and e.released and e.bytes_to_send == 0 for e in seen)


def test_cli_display_draws_each_repo_and_silences_tqdm(family: Path, api: HfApi) -> None:
    """The Rich display shows every repo released with its tag; huggingface_hub's bars are off only meanwhile."""
    assert not are_progress_bars_disabled()
    with err_console.capture() as captured, release_progress(err_console, enabled=True) as on_event:
        assert on_event is not None and are_progress_bars_disabled()
        report = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check, on_event=on_event)
    assert not are_progress_bars_disabled()
    output = captured.get()
    for plan in report.plan.repos:
        assert plan.repo in output
    assert output.count("released v1.0") >= len(report.plan.repos)
    with release_progress(err_console, enabled=False) as nothing:
        assert nothing is None and not are_progress_bars_disabled()
