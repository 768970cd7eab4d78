"""The CPython versions `actions/setup-python` can install: a version it cannot find fails the job.

setup-python resolves `python-version` against the runner's tool cache, then the versions manifest of
actions/python-versions (`versions-manifest.json`); a version in neither fails the step ("The version
'3.99' with architecture 'x64' was not found for this operating system"). The lists below are that
manifest's, read from actions/python-versions at 7ecd5646f5754416c84a566afefc50324526a3d9 (2026-08-12):
its `stable` entries, and the pre-releases that `allow-prereleases: true` lets a `X.Y` spec match.
Refresh them from a newer copy of the manifest when a CPython is released.

What is judged: `X`, `X.x`, `X.Y`, `X.Y.x` (some release of that line), `X.Y.Z` (that release), a trailing
`t` (free-threaded) read as its version. Other forms (semver ranges, `pypy*`, `graalpy*`) are not judged
here and are named so in the job's report.
"""

from __future__ import annotations

import re

_STABLE_TEXT = """
3.14.7 3.14.6 3.14.5 3.14.4 3.14.3 3.14.2 3.14.1 3.14.0 3.13.15 3.13.14 3.13.13 3.13.12 3.13.11 3.13.10 3.13.9
3.13.8 3.13.7 3.13.6 3.13.5 3.13.4 3.13.3 3.13.2 3.13.1 3.13.0 3.12.14 3.12.13 3.12.12 3.12.11 3.12.10 3.12.9
3.12.8 3.12.7 3.12.6 3.12.5 3.12.4 3.12.3 3.12.2 3.12.1 3.12.0 3.11.16 3.11.15 3.11.14 3.11.13 3.11.12 3.11.11
3.11.10 3.11.9 3.11.8 3.11.7 3.11.6 3.11.5 3.11.4 3.11.3 3.11.2 3.11.1 3.11.0 3.10.21 3.10.20 3.10.19 3.10.18
3.10.17 3.10.16 3.10.15 3.10.14 3.10.13 3.10.12 3.10.11 3.10.10 3.10.9 3.10.8 3.10.7 3.10.6 3.10.5 3.10.4 3.10.3
3.10.2 3.10.1 3.10.0 3.9.25 3.9.24 3.9.23 3.9.22 3.9.21 3.9.20 3.9.19 3.9.18 3.9.17 3.9.16 3.9.15 3.9.14 3.9.13
3.9.12 3.9.11 3.9.10 3.9.9 3.9.8 3.9.7 3.9.6 3.9.5 3.9.4 3.9.3 3.9.2 3.9.1 3.9.0 3.8.18 3.8.17 3.8.16 3.8.15
3.8.14 3.8.13 3.8.12 3.8.11 3.8.10 3.8.9 3.8.8 3.8.7 3.8.6 3.8.5 3.8.4 3.8.3 3.8.2 3.8.1 3.8.0 3.7.17 3.7.16
3.7.15 3.7.14 3.7.13 3.7.12 3.7.11 3.7.10 3.7.9 3.7.8 3.7.7 3.7.6 3.7.5 3.7.4 3.7.3 3.7.2 3.7.1 3.6.15 3.6.14
3.6.13 3.6.12 3.6.11 3.6.10 3.6.9 3.6.8 3.6.7 3.5.10 3.5.9 3.5.4 3.4.10 3.4.4 3.3.7 3.3.5 3.2.5 3.1.4 3.0.1
"""
_PRERELEASE_TEXT = """
3.15.0-rc.1 3.15.0-beta.4 3.15.0-beta.3 3.15.0-beta.2 3.15.0-beta.1 3.15.0-alpha.8 3.15.0-alpha.7 3.15.0-alpha.6
3.15.0-alpha.5 3.15.0-alpha.4 3.15.0-alpha.3 3.15.0-alpha.2 3.15.0-alpha.1 3.14.5-rc.1 3.14.0-rc.3 3.14.0-rc.2
3.14.0-rc.1 3.14.0-beta.4 3.14.0-beta.3 3.14.0-beta.2 3.14.0-beta.1 3.14.0-alpha.7 3.14.0-alpha.6 3.14.0-alpha.5
3.14.0-alpha.4 3.14.0-alpha.3 3.14.0-alpha.2 3.14.0-alpha.1 3.14.0-alpha.0 3.13.0-rc.3 3.13.0-rc.2 3.13.0-rc.1
3.13.0-beta.4 3.13.0-beta.3 3.13.0-beta.2 3.13.0-beta.1 3.13.0-alpha.6 3.13.0-alpha.5 3.13.0-alpha.4
3.13.0-alpha.3 3.13.0-alpha.2 3.13.0-alpha.1 3.12.0-rc.3 3.12.0-rc.2 3.12.0-rc.1 3.12.0-beta.4 3.12.0-beta.3
3.12.0-beta.2 3.12.0-beta.1 3.12.0-alpha.7 3.12.0-alpha.6 3.12.0-alpha.5 3.12.0-alpha.4 3.12.0-alpha.3
3.12.0-alpha.2 3.12.0-alpha.1 3.11.0-rc.2 3.11.0-rc.1 3.11.0-beta.5 3.11.0-beta.4 3.11.0-beta.3 3.11.0-beta.2
3.11.0-beta.1 3.11.0-alpha.7 3.11.0-alpha.6 3.11.0-alpha.5 3.11.0-alpha.4 3.11.0-alpha.3 3.11.0-alpha.2
3.11.0-alpha.1 3.10.0-rc.2 3.10.0-rc.1 3.10.0-beta.4 3.10.0-beta.3 3.10.0-beta.2 3.10.0-beta.1 3.10.0-alpha.7
3.10.0-alpha.6 3.10.0-alpha.5 3.10.0-alpha.4 3.10.0-alpha.3 3.10.0-alpha.2 3.10.0-alpha.1 3.9.2-rc.1 3.9.1-rc.1
3.9.0-rc.2 3.9.0-rc.1 3.9.0-beta.5 3.9.0-beta.4
"""
_STABLE = frozenset(_STABLE_TEXT.split())
_PRERELEASE = frozenset(_PRERELEASE_TEXT.split())
_PLAIN = re.compile(r"^(\d+)(?:\.(\d+|x))?(?:\.(\d+|x))?t?$")


def known(spec: str, *, allow_prereleases: bool = False) -> bool | None:
    """Whether setup-python finds a CPython for `spec`: True/False, None for a form not judged here."""
    match = _PLAIN.match(spec.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    candidates = _STABLE | (_PRERELEASE if allow_prereleases else frozenset())
    for version in candidates:
        parts = re.split(r"[.-]", version)
        if parts[0] != major:
            continue
        if minor in (None, "x") or (parts[1] == minor and (patch in (None, "x") or
                                                           (parts[2] == patch and version in _STABLE))):
            return True
    return False
