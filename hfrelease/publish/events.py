"""What a release reports while it runs, as data: the CLI draws it (Rich), tests and other callers read it.

Per repo, in order: `RepoPlanned` once, then for each step it runs `StepStarted` ... `StepDone`, with
`BytesSent` during `stage` while huggingface_hub reads weight files to upload them. Steps:

    stage    the bundle committed on the staging branch (or a pull request); the bytes move here
    verify   the staged commit read back: every file's sha256 and size, MANIFEST and card downloaded
    promote  one commit on main (only once every repo is staged)
    tag      the release tag at that commit

The core never formats these for a terminal and never imports a display library. `BytesSent` is emitted
from huggingface_hub's upload threads, so a handler must be thread-safe (Rich's `Progress` is).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Step = Literal["stage", "verify", "promote", "tag"]
STEPS: tuple[Step, ...] = ("stage", "verify", "promote", "tag")


@dataclass(frozen=True, kw_only=True)
class RepoPlanned:
    """A repo of the release, before anything is written; `released`: it needs no step at all."""

    repo: str
    bytes_to_send: int  # an upper bound: the Hub skips content it already stores
    released: bool


@dataclass(frozen=True, kw_only=True)
class StepStarted:
    repo: str
    step: Step


@dataclass(frozen=True, kw_only=True)
class StepDone:
    """`commit` is what the step produced or checked; `detail` a few words ("reused", "published", ...)."""

    repo: str
    step: Step
    commit: str | None
    detail: str


@dataclass(frozen=True, kw_only=True)
class BytesSent:
    """Bytes of one file read for upload so far; absolute, so a retried PUT simply starts again from 0."""

    repo: str
    path: str
    sent: int
    size: int


PublishEvent = RepoPlanned | StepStarted | StepDone | BytesSent
OnEvent = Callable[[PublishEvent], None]


def ignore(event: PublishEvent) -> None:
    """The default handler: nobody is watching."""
