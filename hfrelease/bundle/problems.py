"""What `hfrelease bundle` would refuse, found for `hfrelease check` without asking the Hub or hashing: each
artifact's files judged as the bundle gathers them, and a draft's training files its card could not show."""

from __future__ import annotations

from pathlib import Path

from hfrelease.bundle.candidates import Refusal
from hfrelease.bundle.gather import candidates_for, declared_files, gather, source_dir
from hfrelease.errors import ConfigProblem
from hfrelease.files.allowlist import Tree
from hfrelease.manifest import Manifest


def file_problems(manifest: Manifest) -> list[ConfigProblem]:
    """What `hfrelease bundle` would refuse, found without asking the Hub or hashing (for `hfrelease check`).

    Published artifacts are gathered as the bundle gathers them (a Hub source's own files are left to the
    bundle: they need the Hub); an artifact that is not published still has its declared files judged,
    since its card quotes them.
    """
    from hfrelease.errors import LedgerError

    refusals: list[Refusal] = []
    for artifact in manifest.artifact:
        found = candidates_for(manifest, artifact)
        if not artifact.publish:
            source = manifest.resolve(artifact.source.path) if artifact.source.path else None
            if source is not None and source.is_dir():
                found.tree = Tree.of(manifest.root, source)
            declared_files(manifest, artifact, source, found)
        else:
            try:
                gather(manifest, artifact, source_dir(manifest, artifact, found, None, hub=False), found)
            except LedgerError as exc:
                found.refuse(manifest.ledger_dir / artifact.id, exc.message, exc.hint or "repair the ledger",
                             where=f"results/{artifact.id}/")  # fmt: skip
        refusals.extend(found.refusals)
    return [r.problem() for r in refusals] + training_problems(manifest)


def training_problems(manifest: Manifest) -> list[ConfigProblem]:
    """A draft's declared train_command.txt and val_metrics.json that its card could not show (not JSON, NaN,
    a credential on the command line, ...: `hfrelease.cards.training`), found by `check` before any eval."""
    from hfrelease.cards.errors import CardError
    from hfrelease.cards.training import TRAIN_COMMAND, VAL_METRICS, parse_train_command, parse_val_metrics

    problems: list[ConfigProblem] = []
    for index, artifact in enumerate(manifest.artifact):
        if artifact.draft is None:
            continue
        metrics, found = [], len(problems)
        tree = Tree.of(manifest.root, manifest.resolve(artifact.source.path) if artifact.source.path else None)
        for position, relative in enumerate(artifact.files):
            path, where = manifest.root / relative, f"artifact[{index}].files[{position}]"
            name = Path(relative).name
            # Only regular files inside the tree are read; the allowlist reports every other one above.
            if name not in (TRAIN_COMMAND, VAL_METRICS) or tree.outside(path) is not None:
                continue
            if not path.is_file() or path.stat().st_size > 1024 * 1024:
                continue
            try:
                text = path.read_text(encoding="utf-8")
                if name == TRAIN_COMMAND:
                    parse_train_command(text, relative)
                else:
                    metrics.append((relative, text))
                    parse_val_metrics([(relative, text)], relative)
            except (CardError, UnicodeDecodeError) as exc:
                problems.append(ConfigProblem(location=where, message=getattr(exc, "message", str(exc))))
        if len(problems) > found:
            continue  # each file's own problem said; the epochs together are judged once those are fixed
        try:
            parse_val_metrics(metrics, f"artifact[{index}].files")
        except CardError as exc:
            problems.append(ConfigProblem(location=f"artifact[{index}].files", message=exc.message))
    return problems
