"""What `--artifact`, `--gate`, `--workload` (and `verify --serve`) select, checked against the manifest.

The one parser every command uses, and every stage below it (so a caller that skips the CLI gets the same
answer): every name that is not an id of the manifest is reported at once, each with "did you mean"
(`references.suggest`) and the ids there are, as a `SelectionError` (exit 3, a mistake about the
manifest's contents, like `hfrelease check`'s). An empty name is one of those mistakes; a name given twice
selects its entry once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hfrelease.errors import ConfigError, ConfigProblem, ExitCode, HfreleaseError
from hfrelease.manifest.model import Manifest
from hfrelease.manifest.references import suggest


class SelectionError(ConfigError):
    """Names given on the command line that the manifest does not declare (every one of them)."""

    exit_code = ExitCode.CONFIG

    def __init__(self, manifest: Manifest, problems: Sequence[ConfigProblem]) -> None:
        self.source = str(manifest.root / "release.toml")
        self.problems = tuple(problems)
        count, family = len(self.problems), manifest.family.name
        lines = "\n".join(f"  - {p.render()}" for p in self.problems)
        HfreleaseError.__init__(
            self,
            f"{count} name{'s' if count != 1 else ''} that {family}'s manifest does not declare:\n{lines}",
            hint="Name ids the manifest declares (`hfrelease check` lists its artifacts, gates and workloads).",
        )


@dataclass(frozen=True, kw_only=True)
class Selection:
    """Checked ids, each once, in the order given; an empty tuple selects everything."""

    artifacts: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()


def _problems(option: str, what: str, names: Sequence[str], known: list[str]) -> list[ConfigProblem]:
    listing = ", ".join(known) or "none declared"
    problems = []
    for name in dict.fromkeys(names):
        if name in known:
            continue
        if not name.strip():
            problems.append(ConfigProblem(location=option, message=f"an empty {what} id (known: {listing})"))
            continue
        problems.append(ConfigProblem(location=option, message=f"no {what} {name!r} (known: {listing})",
                                      suggestion=suggest(name, known)))
    return problems


def select(
    manifest: Manifest,
    *,
    artifacts: Sequence[str] = (),
    gates: Sequence[str] = (),
    workloads: Sequence[str] = (),
    serve: str | None = None,
) -> Selection:
    """The selection, each name checked; raises `SelectionError` naming every unknown one (exit 3).

    `serve`: `verify --serve ID`, an artifact id like `--artifact`'s.
    """
    known_artifacts = [a.id for a in manifest.artifact]
    problems = [
        *_problems("--artifact", "artifact", artifacts, known_artifacts),
        *_problems("--gate", "gate", gates, [g.id for g in manifest.gate]),
        *_problems("--workload", "workload", workloads, [w.id for w in manifest.workload]),
        *_problems("--serve", "artifact", [serve] if serve is not None else [], known_artifacts),
    ]
    if problems:
        raise SelectionError(manifest, problems)
    return Selection(artifacts=tuple(dict.fromkeys(artifacts)), gates=tuple(dict.fromkeys(gates)),
                     workloads=tuple(dict.fromkeys(workloads)))
