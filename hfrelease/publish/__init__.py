"""Publish: push a family's bundles to the Hub, all-or-nothing, one commit and one tag per repo.

`family.publish_family` is the entry point; `plan.py` the release as planned, `release.py` the staged,
resumable driver, `staging.py` the per-repo staging, `promote.py` the commits to main, tags and clean-up,
`verify.py` the read-back checks, `events.py` the structured progress a display draws, `tokens.py` the
credential handling.
"""

from hfrelease.publish.family import PublishReport, publish_family
from hfrelease.publish.plan import ReleasePlan, RepoPlan
from hfrelease.publish.promote import RepoOutcome
from hfrelease.publish.release import ReleaseOutcome, check_tags, execute_release, plan_release
from hfrelease.publish.target import LOCAL, HubTarget, open_hub
from hfrelease.publish.tokens import Token, resolve_token
from hfrelease.publish.verify import verify_release, verify_revision

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
