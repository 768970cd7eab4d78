"""Errors of the card stage, in the project's one hierarchy (each carries its exit code and a hint)."""

from __future__ import annotations

from collections.abc import Sequence

from hfrelease.errors import ExitCode, HfreleaseError


class CardError(HfreleaseError):
    """A card cannot be rendered as asked: a template, a section or a declared file is wrong."""

    exit_code = ExitCode.CONFIG


class MissingMeasurementError(HfreleaseError):
    """The manifest promises a measurement the ledger does not hold: a card would have an empty cell."""

    exit_code = ExitCode.MEASUREMENT_FAILED

    def __init__(self, missing: Sequence[str]) -> None:
        self.missing = tuple(missing)
        lines = "\n".join(f"  - {m}" for m in self.missing)
        super().__init__(
            f"{len(self.missing)} measurement{'s' if len(self.missing) != 1 else ''} missing from the ledger:\n{lines}",
            hint="Run `hfrelease eval` for the family (it measures only what is missing), or restrict the gate's "
            "`artifacts` in release.toml.",
        )


class CardLintError(HfreleaseError):
    """Rendered cards that must not be published: every problem found, in one go."""

    exit_code = ExitCode.CONFIG

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''} in the rendered cards:\n{lines}",
            hint="Re-render with `hfrelease render` (never edit numbers by hand), then `hfrelease check --cards`.",
        )
