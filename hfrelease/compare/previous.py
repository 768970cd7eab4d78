"""`previous`: the family's newest release tag on the Hub, other than the one being released, found by history.

The release workflow renders its cards `--since previous` because a workflow file cannot know the name of
the release before its own. Which tag is newest is read from where each release left it, never from the
tags' names: names need not sort (`v0.10` sorts before `v0.9`; a family may change its naming), and the
Hub keeps no time for a tag. `hfrelease publish` tags the commit it promotes onto main in every published
repo, so in one repo a tag is newer than another when its commit is nearer the head of main
(`list_repo_commits`, newest first). Across repos (an artifact added since an older release lacks its
tag; one dropped keeps its old tags):

1. each repo's newest tag is a candidate (a tag on no commit of main, e.g. on a pull request, is no release);
2. a candidate is out when a repo holding it and another candidate puts the other nearer its head;
3. if more than one is left (no repo holds two of them) or none (repos disagree: a tag was moved), the one
   whose tagged commit is the most recent by the Hub's commit time wins, then the greater name.

Only tags named as `[publish].tag` names releases count (`v{version}`: `v...`). The tag being released
(the manifest's own) is left out, so a re-run of a release whose
publish already tagged some repos still compares with the release before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from hfrelease.errors import UsageError

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hfrelease.manifest import Manifest

PREVIOUS = "previous"


class NoPreviousRelease(UsageError):
    """No repo of the family holds a release tag other than the one being released: a first release."""


@dataclass(frozen=True, kw_only=True)
class TaggedCommit:
    """A release tag in one repo: how far its commit is from the head of main (0: the head) and when it was made."""

    repo: str
    tag: str
    distance: int
    created_at: datetime


def tagged_commits(api: HfApi, repos: list[str]) -> list[TaggedCommit]:
    """Every tag of `repos` on a commit of main; a repo that does not exist (yet) has none."""
    from huggingface_hub.errors import RepositoryNotFoundError

    from hfrelease.hub_errors import hub_errors

    found: list[TaggedCommit] = []
    for repo in repos:
        with hub_errors(f"listing the tags of {repo}"):
            try:
                tags = api.list_repo_refs(repo).tags
            except RepositoryNotFoundError:
                # 404, or 401 to a caller without a token (the Hub hides private repos so): a repo a first
                # release has not created yet. A refused token or a failing Hub is still exit 7.
                continue
            history = api.list_repo_commits(repo) if tags else []
        position = {commit.commit_id: (i, commit.created_at) for i, commit in enumerate(history)}
        for tag in tags:
            if tag.target_commit in position:
                distance, created_at = position[tag.target_commit]
                found.append(TaggedCommit(repo=repo, tag=tag.name, distance=distance, created_at=created_at))
    return found


def newest_tag(tagged: list[TaggedCommit], *, exclude: str) -> str | None:
    """The newest release tag among `tagged` but `exclude`, by the rules in this module's docstring."""
    by_repo: dict[str, dict[str, TaggedCommit]] = {}
    for item in tagged:
        if item.tag != exclude:
            by_repo.setdefault(item.repo, {})[item.tag] = item
    candidates = {min(tags.values(), key=lambda t: t.distance).tag for tags in by_repo.values()}
    left = {c for c in candidates
            if not any(c in tags and o in tags and tags[o].distance < tags[c].distance
                       for tags in by_repo.values() for o in candidates)}  # fmt: skip
    if len(left) == 1:
        return left.pop()
    pool = left or candidates
    if not pool:
        return None
    made = {c: max(t[c].created_at for t in by_repo.values() if c in t) for c in pool}
    return max(pool, key=lambda c: (made[c], c))


def release_tag_pattern(manifest: Manifest) -> re.Pattern[str]:
    """The names `[publish].tag` gives releases (`v{version}`: `v` and anything): a repo's other tags (a
    vendor's own, in a repo whose weights the family publishes as they are) are no release of the family."""
    template = manifest.publish.tag
    pattern = re.escape(template).replace(re.escape("{version}"), ".+")
    return re.compile(pattern.replace(re.escape("{family}"), re.escape(manifest.family.name)))


def previous_release(manifest: Manifest, api: HfApi) -> str:
    """The family's newest release tag on the Hub other than `manifest.tag_name()`; NoPreviousRelease if none."""
    current = manifest.tag_name()
    repos = [a.repo for a in manifest.artifact if a.publish]
    releases = release_tag_pattern(manifest)
    tagged = [t for t in tagged_commits(api, repos) if releases.fullmatch(t.tag)]
    tag = newest_tag(tagged, exclude=current)
    if tag is None:
        anonymous = "" if api.token else "; without a token a private repo looks absent"
        raise NoPreviousRelease(f"{PREVIOUS}: no repo of the family holds a release tag other than {current} at "
                                f"{api.endpoint} (a first release{anonymous})",
                                hint="Name the release to compare with, or release once before comparing.")
    return tag


def tag_names(api: HfApi, repos: list[str]) -> list[str]:
    """Every release tag the repos hold, newest first (for an error naming what can be compared)."""
    tagged = tagged_commits(api, repos)
    order: list[str] = []
    while (tag := newest_tag([t for t in tagged if t.tag not in order], exclude="")) is not None:
        order.append(tag)
    return order
