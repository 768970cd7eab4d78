"""One artifact's files gathered for its repo before hashing (`Candidates`), and the files refused on the way
(`Refusal`): what `hfrelease.bundle.gather` and `hfrelease.bundle.ledger_files` fill in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hfrelease.bundle.checksums import MANIFEST_NAME
from hfrelease.errors import ConfigProblem
from hfrelease.files.allowlist import Kind, Problem, Tree, admit
from hfrelease.files.hashing import FileHash

RESERVED = (MANIFEST_NAME, ".gitattributes")  # the Hub's .gitattributes stays as the repo has it


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A file that cannot be published, where it is named, and what to do about it."""

    artifact: str
    path: str
    reason: str
    fix: str
    location: str = ""  # the manifest key (`artifact[1].files[0]`) or family-relative path that names it

    def render(self) -> str:
        return f"[{self.artifact}] {self.path}: {self.reason} ({self.fix})"

    def problem(self) -> ConfigProblem:
        """The refusal as `hfrelease check` reports it: at its location, naming the file unless that does."""
        message = f"{self.reason} ({self.fix})"
        named = self.location and self.location.rstrip("/") in self.path
        return ConfigProblem(location=self.location or self.artifact,
                             message=message if named else f"{self.path}: {message}")  # fmt: skip


@dataclass
class Candidates:
    """Files gathered for one artifact before hashing: repo path -> real local path."""

    artifact: str
    index: int  # the artifact's place in the manifest, for locations
    tree: Tree  # where its files may resolve: the family directory, then also its source
    by_path: dict[str, tuple[Path, str]] = field(default_factory=dict)
    in_repo: dict[str, tuple[FileHash, str]] = field(default_factory=dict)  # repo path -> (Hub's digest, role)
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def refuse(self, path: Path | str, reason: str, fix: str, *, where: str = "") -> None:
        self.refusals.append(Refusal(artifact=self.artifact, path=str(path), reason=reason, fix=fix, location=where))

    def judge(self, path: Path, *, kind: Kind, name: str, where: str) -> Path | None:
        """The allowlist's verdict on `path` shipped as `name`: its real path, or None (refused, recorded)."""
        verdict = admit(path, tree=self.tree, kind=kind, name=name)
        if isinstance(verdict, Problem):
            self.refuse(path, verdict.reason, verdict.fix, where=where)
            return None
        return verdict

    def add(self, repo_path: str, real: Path, role: str, *, where: str = "") -> None:
        if repo_path in RESERVED:
            self.refuse(real, f"would overwrite the repo's {repo_path}", "rename or remove the file", where=where)
            return
        if "\n" in repo_path or "\\" in repo_path:
            self.refuse(real, "the name contains a newline or backslash", "rename the file", where=where)
            return
        existing = self.by_path.get(repo_path)
        if existing is not None and existing[0] != real:
            self.refuse(real, f"{existing[0]} already goes to {repo_path} in the repo", "keep only one of them",
                        where=where)  # fmt: skip
            return
        self.by_path[repo_path] = (real, role)
