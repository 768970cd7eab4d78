"""Publish: push a family's bundles to the Hub, all-or-nothing, one commit and one tag per repo.

`family.publish_family` is the entry point; `decision.py` what a release publishes and when it stops (the tag,
the eval matrix, the gate decision; `gates.py` holds a plain `publish` to it), `plan.py` the release as
planned, `release.py` the staged, resumable driver, `staging.py` the per-repo staging, `promote.py` the commits
to main, tags and clean-up, `readback.py` what the Hub serves read back and checked (every staged commit, and
`hfrelease verify`), `events.py` the structured progress a display draws, `tokens.py` the credential handling.
"""

from hfrelease.publish.family import PublishReport, publish_family
from hfrelease.publish.plan import ReleasePlan, RepoPlan
from hfrelease.publish.promote import RepoOutcome
from hfrelease.publish.readback import verify_release, verify_revision
from hfrelease.publish.release import ReleaseOutcome, check_tags, execute_release, plan_release
from hfrelease.publish.target import LOCAL, HubTarget, open_hub
from hfrelease.publish.tokens import Token, resolve_token

__all__ = [
    "LOCAL",
    "HubTarget",
    "PublishReport",
    "ReleaseOutcome",
    "ReleasePlan",
    "RepoOutcome",
    "RepoPlan",
    "Token",
    "check_tags",
    "execute_release",
    "open_hub",
    "plan_release",
    "publish_family",
    "resolve_token",
    "verify_release",
    "verify_revision",
]
