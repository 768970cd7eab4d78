"""`publish_family`: bundle, plan and (unless a dry run) release a whole family; what the CLI and the demo call."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from huggingface_hub import HfApi

from hfrelease.bundle import FamilyBundle, bundle_family
from hfrelease.bundle.plugin_check import PluginChecker, check_plugin
from hfrelease.errors import UsageError
from hfrelease.files.hashing import HashCache
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.publish import trusted
from hfrelease.publish.events import OnEvent
from hfrelease.publish.gates import GateCheck, check_gates
from hfrelease.publish.plan import ReleasePlan
from hfrelease.publish.record import published_dir, record_published
from hfrelease.publish.release import (
    Echo,
    ReleaseOutcome,
    check_pinned_weights,
    check_tags,
    execute_release,
    plan_release,
)
from hfrelease.publish.target import disable_xet, open_hub
from hfrelease.publish.tokens import Token, resolve_token

ApiFactory = Callable[[str, str | None], HfApi]


def _default_api(endpoint: str, token: str | None) -> HfApi:
    # token=False (not None) when there is none: HfApi must not go looking for one on its own.
    return HfApi(endpoint=endpoint, token=token if token is not None else False)


@dataclass(frozen=True, kw_only=True)
class PublishReport:
    bundle: FamilyBundle
    plan: ReleasePlan
    outcome: ReleaseOutcome | None  # None for a dry run
    dry_run: bool
    dry_run_reason: str | None
    endpoint: str
    token_source: str | None
    gates: GateCheck  # recorded gate problems (failed ones only when allowed)


def resume_command(root: Path, *, hub: str | None, hub_root: Path | None, artifacts: Sequence[str]) -> str:
    """The `hfrelease publish` command line that resumes this release (never with --pr: it finishes it)."""
    words = ["hfrelease", "publish", str(root)]
    if hub:
        words += ["--hub", hub]
    if hub_root is not None:
        words += ["--hub-root", str(hub_root)]
    for artifact in artifacts:
        words += ["--artifact", artifact]
    return shlex.join(words)


def publish_family(
    manifest: Manifest | Path,
    *,
    hub: str | None = None,
    hub_root: Path | None = None,
    token: Token | None = None,
    dry_run: bool | None = None,
    pr: bool | None = None,
    artifacts: Sequence[str] = (),
    cache: HashCache | None = None,
    api: HfApi | None = None,
    api_factory: ApiFactory = _default_api,
    plugin_checker: PluginChecker | None = check_plugin,
    echo: Echo | None = None,
    on_event: OnEvent | None = None,
    allow_failed_gates: bool = False,
    from_bundle: Path | None = None,
    attestation: Path | None = None,
) -> PublishReport:
    """Bundle every published artifact, plan against the Hub, and release all-or-nothing.

    `hub` is a Hub URL or `local` (the built-in Hub under `hub_root`, default `<family>/.hfrelease/hub`);
    default: the manifest's `[publish].endpoint`. `api` overrides both with a ready client. Without a
    token (given, or resolved the way huggingface_hub resolves it) the run is a dry run: the plan only.
    `echo` gets log lines, `on_event` the structured progress of `hfrelease.publish.events`.

    An artifact whose recorded gate results fail (`gates.check_gates`) is refused before the Hub is
    contacted, unless `allow_failed_gates`: then its release commit names those gates. Before the release
    writes to the Hub, each repo's MANIFEST is kept in `<family>/.hfrelease/bundle/<tag>/` for `verify`.

    `from_bundle` publishes the bundle another job wrote (`hfrelease bundle --out DIR`) instead of making one:
    every file is checked against its repo's MANIFEST first, and nothing is built (no plugin check: the job
    holding the token runs no third-party code). Its gates were judged by the job that made the bundle.
    `attestation` (a Sigstore bundle of the MANIFESTs' provenance) ships beside each MANIFEST.
    """
    from hfrelease.bundle import read_bundle

    loaded = manifest if isinstance(manifest, Manifest) else load_manifest(manifest)
    if from_bundle is not None:
        bundle = read_bundle(loaded, from_bundle, artifacts=artifacts, attestation=attestation)
        gates = GateCheck(failed=(), unjudged=())
    elif attestation is not None:
        raise UsageError("an attestation ships only with a bundle made beforehand",
                         hint="Pass --from-bundle DIR: the attestation signs the MANIFESTs in DIR.")
    else:
        bundle = bundle_family(loaded, cache=cache, artifacts=artifacts, plugin_checker=plugin_checker)
        # After bundling: the weights are hashed (and cached) once, and the gates judge that same content.
        gates = check_gates(loaded, artifacts=artifacts, hash_cache=cache, allow_failed=allow_failed_gates)
    say = echo or (lambda _: None)
    if gates.unjudged:
        say(f"{len(gates.unjudged)} gate(s) have no recorded result to judge for the current inputs: "
            "publish does not stop on those (the release job does)")
    target_hub = hub or loaded.publish.endpoint
    source: str | None = None  # trusted publishing's, when the tokens come from it
    with contextlib.ExitStack() as stack:
        if api is not None:
            disable_xet()
            client, endpoint, credential = api, api.endpoint, token
        else:
            target = stack.enter_context(open_hub(target_hub, family_root=loaded.root, hub_root=hub_root,
                                                  announce=echo))  # fmt: skip
            endpoint = target.endpoint
            credential = token or target.token or resolve_token()
            client = api_factory(endpoint, credential.value if credential else None)
            if credential is None and dry_run is not True and trusted.available():
                # One short-lived token per repo, each sent only with its repo's requests (`trusted.py`).
                tokens = trusted.exchange_per_repo([r.repo for r in bundle.repos], endpoint=endpoint)
                client, source = trusted.RepoScopedApi(endpoint=endpoint, tokens=tokens), trusted.SOURCE
                if bundle.collection:
                    say(f"collection {bundle.collection!r} left as it is: a trusted-publishing token is scoped to "
                        "one repo and cannot change a collection (add the repos with a user token)")
                    bundle = replace(bundle, collection=None)
        reason = None
        if dry_run:
            reason = "--dry-run"
        elif dry_run is None and credential is None and source is None and api is None:
            reason = "no Hub token found (HF_TOKEN, `hf auth login`, or trusted publishing): dry run"
        plan = plan_release(bundle, client, failed_gates=gates.by_artifact())
        outcome = None
        if reason is None:
            use_pr = loaded.publish.pr if pr is None else pr
            resume = resume_command(loaded.root, hub=hub or (api.endpoint if api is not None else None),
                                    hub_root=hub_root, artifacts=artifacts)  # fmt: skip
            check_tags(plan)
            check_pinned_weights(plan)
            # What is being published, kept off the Hub before anything is written (once the release can only be
            # this bundle's): `hfrelease verify` compares the Hub's copy with it, also after a run that stopped
            # (or failed on the collection) once some repos were tagged.
            record_published(bundle.repos, published_dir(loaded.root, bundle.tag))
            outcome = execute_release(plan, client, pr=use_pr, echo=echo, on_event=on_event, resume_command=resume)
        return PublishReport(
            bundle=bundle, plan=plan, outcome=outcome, dry_run=reason is not None, dry_run_reason=reason,
            endpoint=endpoint, token_source=source or (credential.source if credential else None), gates=gates,
        )  # fmt: skip
