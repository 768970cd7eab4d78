"""The Hub side of the preflight: each Hub source's pinned revision exists and holds weights; the release tag is
on no repo yet.

Sources are read where `hfrelease eval` downloads them: huggingface_hub's endpoint (`HF_ENDPOINT`). The
tag is looked up where `publish` would put it: `[publish].endpoint` when the manifest sets one, else the
same endpoint. The Hub may be out of reach (an offline runner, `HF_HUB_OFFLINE=1`): the preflight then
says so in a note and checks the rest; an unreachable Hub is never a problem of the manifest. With
`HF_HUB_OFFLINE=1` a loopback endpoint (the built-in Hub, `hfrelease hub serve`) is still asked: it is on
this machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hfrelease.errors import ConfigProblem
from hfrelease.files.hashing import WEIGHT_SUFFIX
from hfrelease.files.sources import hub_endpoint, is_loopback, source_token
from hfrelease.manifest import Manifest

if TYPE_CHECKING:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoSibling

_DEFAULT_ENDPOINT = "https://huggingface.co"
_ANSWERED: set[str] = set()  # endpoints that accepted a connection in this process


class HubUnreachable(Exception):
    """The endpoint did not answer (no network, offline mode, DNS, timeout)."""


@contextlib.contextmanager
def _access(endpoint: str) -> Iterator[None]:
    """Raise HubUnreachable for offline mode off this machine and for connection failures inside the block."""
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    was_offline = constants.HF_HUB_OFFLINE
    if was_offline and not is_loopback(endpoint):
        raise HubUnreachable(f"HF_HUB_OFFLINE=1 keeps hfrelease off {endpoint}")
    if endpoint not in _ANSWERED:
        _probe(endpoint)
        _ANSWERED.add(endpoint)
    constants.HF_HUB_OFFLINE = False
    try:
        yield
    except HfHubHTTPError:
        raise
    except (OfflineModeIsEnabled, OSError) as exc:
        raise HubUnreachable(f"{endpoint} is not reachable ({type(exc).__name__})") from exc
    except Exception as exc:
        # httpx's transport errors (ConnectError, timeouts) are not OSErrors.
        if type(exc).__module__.startswith(("httpx", "httpcore", "requests", "urllib3")):
            raise HubUnreachable(f"{endpoint} is not reachable ({type(exc).__name__})") from exc
        raise
    finally:
        constants.HF_HUB_OFFLINE = was_offline


@dataclass(frozen=True, kw_only=True)
class HubCheck:
    problems: tuple[ConfigProblem, ...]
    notes: tuple[str, ...]
    fetch: Callable[[str, str, str], Path | None] | None  # for the chat templates; None: Hub not reachable


def _fetcher(api: HfApi, endpoint: str) -> Callable[[str, str, str], Path | None]:
    """One file of a Hub source at its commit (None: the repo has no such file; LookupError: unreadable)."""

    def fetch(repo: str, revision: str, filename: str) -> Path | None:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

        try:
            with _access(endpoint):
                return Path(hf_hub_download(repo, filename, revision=revision, endpoint=endpoint, token=api.token))
        except EntryNotFoundError:
            return None
        except (HfHubHTTPError, HubUnreachable) as exc:  # a missing revision is reported by hub_checks
            raise LookupError(str(exc)) from exc

    return fetch


def _probe(endpoint: str, timeout: float = 3.0) -> None:
    """Fail fast when nothing answers at `endpoint`: huggingface_hub retries a failed download for ~20 s."""
    import socket

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout).close()
    except OSError as exc:
        raise HubUnreachable(f"{endpoint} is not reachable ({exc.strerror or type(exc).__name__})") from exc


def _weightless(siblings: list[RepoSibling] | None, index: int, where: str) -> list[ConfigProblem]:
    """A Hub source whose pinned commit holds no `*.safetensors` (None: the Hub did not list its files)."""
    if siblings is None or any(s.rfilename.endswith(WEIGHT_SUFFIX) for s in siblings):
        return []
    names = sorted(s.rfilename for s in siblings)[:8]
    return [ConfigProblem(location=f"artifact[{index}].source.revision",
                          message=f"{where} holds no {WEIGHT_SUFFIX} files (it holds: "
                                  f"{', '.join(names) or 'nothing'}): there is nothing to serve or hash at that "
                                  "commit; pin the commit that uploaded the weights")]


def hub_checks(manifest: Manifest, *, api_factory: Callable[[str], HfApi] | None = None) -> HubCheck:
    """Revisions of Hub sources and the release tag on each published repo, when the Hub answers."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    # Sources are read with the eval jobs' read-only token when it is set (`hfrelease.files.sources.source_token`).
    make = api_factory or (lambda endpoint: HfApi(endpoint=endpoint, token=source_token()))
    sources_at = hub_endpoint()
    tags_at = manifest.publish.endpoint.rstrip("/")
    tags_at = sources_at if tags_at == _DEFAULT_ENDPOINT else tags_at
    problems: list[ConfigProblem] = []
    notes: list[str] = []
    fetch: Callable[[str, str, str], Path | None] | None = None
    hub_sources = [(i, a) for i, a in enumerate(manifest.artifact) if a.source.hub is not None]
    try:
        api = make(sources_at)
        for index, artifact in hub_sources:
            repo, revision = artifact.source.hub, artifact.source.revision
            assert repo is not None and revision is not None
            where = f"artifact[{index}].source.revision"
            try:
                with _access(sources_at):
                    info = api.repo_info(repo, revision=revision)
                problems += _weightless(getattr(info, "siblings", None), index, f"{repo}@{revision[:12]}")
            except RevisionNotFoundError:
                problems.append(ConfigProblem(location=where, message=f"{repo} has no commit {revision} at "
                                              f"{sources_at} (pin a commit the repo holds: `hf api models/{repo} "
                                              "--expand sha`)"))
            except RepositoryNotFoundError:
                problems.append(ConfigProblem(location=f"artifact[{index}].source.hub", message=f"no repo {repo} at "
                                              f"{sources_at} (or it is private and HF_TOKEN cannot read it)"))
            except HfHubHTTPError as exc:
                notes.append(f"{repo}@{revision[:12]} not checked: {sources_at} answered {exc}")
        fetch = _fetcher(api, sources_at)
    except HubUnreachable as exc:
        if hub_sources:
            notes.append(f"Hub sources' revisions not checked: {exc}")
    tag = manifest.tag_name()
    published = [a.repo for a in manifest.artifact if a.publish]
    tagged: list[str] = []
    unknown = False
    try:
        api = make(tags_at)
        for repo in published:
            try:
                with _access(tags_at):
                    refs = api.list_repo_refs(repo)
            except RepositoryNotFoundError:
                continue  # a repo this release creates
            except HfHubHTTPError as exc:
                notes.append(f"tags of {repo} not checked: {tags_at} answered {exc}")
                unknown = True
                continue
            taken = {t.name: t.target_commit for t in refs.tags}
            if tag in taken:
                tagged.append(f"{repo} (commit {taken[tag][:12]})")
    except HubUnreachable as exc:
        notes.append(f"release tag {tag!r} not looked up on the family's repos: {exc}")
        return HubCheck(problems=tuple(problems), notes=tuple(notes), fetch=fetch)
    if tagged and len(tagged) == len(published) and not unknown:
        problems.append(ConfigProblem(location="family.version", message=f"the release tag {tag!r} is already on "
                                      f"every published repo at {tags_at} ({', '.join(tagged)}): that release is "
                                      "out; raise the version for the next one"))
    elif tagged:
        # Some repos carry the tag, some not: a publish that stopped after its first repos, which a re-run
        # completes (hfrelease.publish resumes; README "Resuming a publish"). Refusing here would make a re-run of
        # the whole workflow impossible; an older release under the same tag is refused by publish instead.
        notes.append(f"the release tag {tag!r} is already on {len(tagged)} of {len(published)} published repos "
                     f"({', '.join(tagged)}): a publish that stopped, which this release completes; if it is an "
                     "older release, raise the version (publish refuses the tag on other content, after the eval jobs)")
    return HubCheck(problems=tuple(problems), notes=tuple(notes), fetch=fetch)

