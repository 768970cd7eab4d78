"""One error hierarchy for hfrelease: each class carries its exit code and a hint saying what to do next.

Core modules raise these; only the CLI turns them into a message and an exit status (`hfrelease.cli`).
The exit codes are part of the public interface (README, "Exit codes") and must not be renumbered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit statuses of the `hfrelease` command."""

    OK = 0
    INTERNAL = 1  # a bug: please report it with HFRELEASE_DEBUG=1 output
    USAGE = 2  # bad command-line usage (Click's own code for it)
    CONFIG = 3  # the release manifest is malformed or inconsistent
    GATE_FAILED = 4  # a measurement completed and a gate did not pass
    SERVER_FAILED = 5  # a vLLM server died or never became healthy
    MEASUREMENT_FAILED = 6  # a measurement could not be trusted (truncated answers, failed requests)
    PUBLISH_FAILED = 7  # the Hub refused or lost part of a publish; nothing half-landed
    # 8 is retired: it meant a stage not built yet, and every stage is built. Never reuse it.
    ENVIRONMENT = 9  # a required tool or environment (vLLM, llm-compressor venv, ...) is missing
    STEP_FAILED = 10  # a release workflow's step failed with a code that is not one of these (its own command, or 1)
    INTERRUPTED = 130  # Ctrl-C: servers stopped, finished results kept


class HfreleaseError(Exception):
    """Base of every error hfrelease reports to a user; never shown with a traceback unless debugging.

    It has no exit code of its own: each subclass names its class of failure, so a user's mistake or a
    failing server can never be reported as exit 1, which is kept for bugs (anything not an HfreleaseError).
    """

    exit_code: ExitCode

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        if not hasattr(self, "exit_code"):
            raise TypeError(f"{type(self).__name__} has no exit code: raise a subclass of HfreleaseError")
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True, kw_only=True)
class ConfigProblem:
    """One problem found in a manifest: where it is (`artifact[2].serve.env`) and what is wrong."""

    location: str
    message: str
    suggestion: str | None = None

    def render(self) -> str:
        text = f"{self.location}: {self.message}" if self.location else self.message
        if self.suggestion:
            text += f" (did you mean {self.suggestion!r}?)"
        return text


class ConfigError(HfreleaseError):
    """The manifest cannot be used; carries every problem found, not just the first."""

    exit_code = ExitCode.CONFIG

    def __init__(self, source: str, problems: Sequence[ConfigProblem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {p.render()}" for p in self.problems)
        super().__init__(
            f"{source}: {count} problem{'s' if count != 1 else ''} in the release manifest:\n{lines}",
            hint="Fix the fields named above and run `hfrelease check` again; "
            "README.md (Manifest reference) documents every key.",
        )


class UsageError(HfreleaseError):
    """The command asks for something that cannot be done as asked (a file it would overwrite, options that
    exclude each other); an id the manifest does not declare is a `SelectionError` (exit 3) instead."""

    exit_code = ExitCode.USAGE


class GateFailedError(HfreleaseError):
    exit_code = ExitCode.GATE_FAILED


class ServerError(HfreleaseError):
    exit_code = ExitCode.SERVER_FAILED


class MeasurementError(HfreleaseError):
    exit_code = ExitCode.MEASUREMENT_FAILED


class PublishError(HfreleaseError):
    exit_code = ExitCode.PUBLISH_FAILED


class HubError(PublishError):
    """A Hub request failed or was refused (401/403, 429 or 5xx after retries, no answer): exit 7 like a publish.

    Built from the client's error by `hfrelease.hub_errors`, naming the endpoint and what to do next.
    `status` is the HTTP status the Hub answered (None: no answer came).
    """

    def __init__(self, message: str, *, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class EnvironmentProblem(HfreleaseError):
    exit_code = ExitCode.ENVIRONMENT


class ArtifactError(HfreleaseError):
    """An artifact's files cannot be hashed as declared: missing, no weights, or a link leaving the directory."""

    exit_code = ExitCode.CONFIG


class LedgerError(HfreleaseError):
    """A ledger record on disk cannot be trusted: unreadable, renamed, or its samples file does not match."""

    exit_code = ExitCode.MEASUREMENT_FAILED
