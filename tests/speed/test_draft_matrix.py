"""The draft x target matrix: compatibility checked on the files, the points it adds, what it never gates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hfrelease.files.hashing import ContentHash, FileHash
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.speed.matrix import incompatibility, matrix_targets, vocabulary
from hfrelease.speed.plan import plan_speed
from hfrelease.speed.result import SpeedRow
from hfrelease.speed.verdict import draft_checks

pytestmark = pytest.mark.unit


def _model(directory: Path, *, tokenizer: str | None = '{"vocab": {"a": 0}}', vocab_size: int | None = 832) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {} if vocab_size is None else {"vocab_size": vocab_size}
    (directory / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        (directory / "tokenizer.json").write_text(tokenizer)
    return directory


def test_compatibility_is_read_from_the_files(tmp_path: Path) -> None:
    """Same tokenizer bytes and vocabulary size: compatible; another tokenizer, size or none at all: not, with why."""
    trained = vocabulary(_model(tmp_path / "trained"))
    head = vocabulary(_model(tmp_path / "head", tokenizer=None))  # an EAGLE head ships no tokenizer of its own
    assert incompatibility(head, trained, vocabulary(_model(tmp_path / "quant"))) is None
    assert "differ" in (incompatibility(head, trained, vocabulary(_model(tmp_path / "other", tokenizer="{}"))) or "")
    assert "vocabulary size 1000" in (incompatibility(head, trained, vocabulary(
        _model(tmp_path / "wide", vocab_size=1000))) or "")
    bare = vocabulary(_model(tmp_path / "bare", tokenizer=None))
    assert "no tokenizer" in (incompatibility(head, trained, bare) or "")
    own = vocabulary(_model(tmp_path / "own", tokenizer='{"vocab": {"b": 0}}'))  # a draft model with its own
    assert "the draft's own" in (incompatibility(own, trained, vocabulary(_model(tmp_path / "q2"))) or "")
    nested = _model(tmp_path / "vl", vocab_size=None)
    (nested / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 832}}))
    assert vocabulary(nested).vocab_size == 832


def _hasher(directory: Path, **_: Any) -> ContentHash:
    import hashlib

    sha = hashlib.sha256(directory.name.encode()).hexdigest()
    return ContentHash(sha256=sha, files=(FileHash(path="model.safetensors", size=1, sha256=sha),), bytes_read=0)


@pytest.fixture
def matrix_family(fixture_family: Path) -> Manifest:
    """The fixture family whose draft (trained against fp8) has `matrix = true` and one workload that serves it
    on fp8 alone; ref has the same tokenizer, the draft model its own identical copy."""
    for name in ("ref", "fp8", "draft"):
        (fixture_family / "checkpoints" / name / "tokenizer.json").write_text('{"vocab": {"a": 0}}')
        (fixture_family / "checkpoints" / name / "config.json").write_text('{"vocab_size": 832}')
    path = fixture_family / "release.toml"
    text = path.read_text().replace('num_speculative_tokens = 3\n\n[[gate]]',
                                    'num_speculative_tokens = 3\nmatrix = true\n\n[[gate]]', 1)
    text = text.replace('concurrency = [1, 2]\nspeculative = ["none", "ngram", "draft"]',
                        'concurrency = [1, 2]\nspeculative = ["none", "draft"]\nartifacts = ["fp8"]')
    path.write_text(text)
    return load_manifest(fixture_family)


def _servers(manifest: Manifest) -> dict[str, list[str]]:
    plan = plan_speed(manifest, ledger=Ledger(manifest.root / "results"), hash_cache=None, hasher=_hasher)
    return {job.label: [p.label for p in job.points] for job in plan.servers}


def test_matrix_adds_compatible_targets_at_the_lowest_concurrency(matrix_family: Manifest) -> None:
    """The draft and no speculation on ref too (same tokenizer and vocabulary), at concurrency 1 only; a target
    whose tokenizer differs is left out, with the reason."""
    assert _servers(matrix_family) == {
        "ref [none]": ["chat c1"], "ref [draft]": ["chat c1"],
        "fp8 [none]": ["chat c1", "chat c2"], "fp8 [draft]": ["chat c1", "chat c2"]}
    (matrix_family.root / "checkpoints" / "ref" / "tokenizer.json").write_text('{"vocab": {"z": 0}}')
    assert _servers(matrix_family) == {"fp8 [none]": ["chat c1", "chat c2"], "fp8 [draft]": ["chat c1", "chat c2"]}
    draft = matrix_family.artifact_by_id("draft")
    targets = matrix_targets(matrix_family, draft, {a.id: matrix_family.resolve(a.source.path or "")
                                                   for a in matrix_family.artifact})
    assert targets.compatible == ("fp8",)
    assert targets.unchecked == (("ref", "its tokenizer files differ from the trained target's"),)
    unknown = matrix_targets(matrix_family, draft, {"fp8": matrix_family.resolve("checkpoints/fp8"),
                                                   "draft": matrix_family.resolve("checkpoints/draft"), "ref": None})
    assert unknown.compatible == ("fp8",) and "not on this machine" in unknown.unchecked[0][1]


def test_matrix_points_are_not_draft_gates(matrix_family: Manifest) -> None:
    """A matrix point on another target is reported, never judged as a draft gate (nor failed as 'not its target')."""
    def row(artifact: str, acceptance: float) -> SpeedRow:
        return SpeedRow(artifact_id=artifact, workload_id="chat", speculative="draft", concurrency=1, draft_id="draft",
                        origin="recorded", status="ok",
                        metrics={"output_throughput": 1.0, "spec_acceptance_rate": acceptance})

    checks = draft_checks(matrix_family, [row("fp8", 0.7), row("ref", 0.01)])
    assert {c.artifact_id for c in checks} == {"fp8"} and all(c.verdict == "pass" for c in checks)


def test_a_list_names_the_targets_and_each_is_still_checked(matrix_family: Manifest) -> None:
    """matrix = [...] measures only the named compatible targets; naming an unknown artifact or a draft is a
    manifest error at its key."""
    from hfrelease.errors import ConfigError

    path = matrix_family.root / "release.toml"
    path.write_text(path.read_text().replace("matrix = true", 'matrix = ["fp8"]'))
    assert _servers(load_manifest(matrix_family.root)) == {"fp8 [none]": ["chat c1", "chat c2"],
                                                          "fp8 [draft]": ["chat c1", "chat c2"]}
    path.write_text(path.read_text().replace('matrix = ["fp8"]', 'matrix = ["ref", "rf", "draft"]'))
    with pytest.raises(ConfigError) as info:
        load_manifest(matrix_family.root)
    problems = {p.location: p.message for p in info.value.problems}
    assert "no artifact with id 'rf'" in problems["artifact[2].draft.matrix[1]"]
    assert "is a draft" in problems["artifact[2].draft.matrix[2]"]
    path.write_text(path.read_text().replace('matrix = ["ref", "rf", "draft"]', 'matrix = ["ref"]'))
    assert "ref [draft]" in _servers(load_manifest(matrix_family.root))
