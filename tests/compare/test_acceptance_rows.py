"""`hfrelease compare`'s acceptance rows resample prompts (issue 24, part 2), on planted ledgers whose speed
records keep per-request counters (`*.requests.jsonl`)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from hfrelease.compare import compare_family
from hfrelease.compare.rows import ComparedRow
from hfrelease.errors import LedgerError
from hfrelease.ledger.store import Ledger
from hfrelease.speed.per_request import PerRequest, RequestOutcome
from hfrelease.speed.point_requests import requests_extra
from hfrelease.speed.records import write_point
from tests.ledger_pairs import write_speed

pytestmark = pytest.mark.unit


def _requests(accepted: list[list[int]]) -> PerRequest:
    return PerRequest(
        outcomes=tuple(
            RequestOutcome(index=i, output_ids=(1, 2), spec=True, accepted_steps=tuple(a), drafted_steps=(3,) * len(a))
            for i, a in enumerate(accepted)
        ),
        depth=3,
    )


def _side(root: Path, requests: PerRequest, acceptance: float, *, weights: str = "d1", step: int = 0) -> Path:
    """A ledger with one speed record (three identical greedy repeats) and its per-request file."""
    scratch = Ledger(root.parent / f"{root.name}-scratch")
    record = write_speed(
        scratch, throughputs=(100.0, 101.0, 99.0), acceptances=(acceptance,) * 3, draft_weights=weights, step=step
    )
    data = requests.to_jsonl()
    name = f"speed-chat-{record.input_key[:12]}-{hashlib.sha256(data).hexdigest()[:12]}.requests.jsonl"
    record = record.model_copy(update={"extra": {**record.extra, **requests_extra(requests, name)}})
    (root / record.artifact_id).mkdir(parents=True)
    for raw in record.extra["raw"]:  # type: ignore[union-attr]
        shutil.copy(scratch.root / record.artifact_id / str(raw), root / record.artifact_id / str(raw))
    write_point(Ledger(root), record, [(name, data)])
    return root


def _acceptance(old: Path, new: Path) -> ComparedRow:
    rows = compare_family(str(old), str(new), manifest=None).rows
    return next(r for r in rows if r.metric == "spec_acceptance_rate")


# Eight prompts the draft predicts unevenly: half accept everything, half nothing (pooled rate 0.5).
UNEVEN = [[3, 3]] * 4 + [[0, 0]] * 4


def test_zero_variance_repeats_resample_prompts(tmp_path: Path) -> None:
    """New draft weights, pooled acceptance 0.5 -> 0.5417 with identical greedy repeats on each side: over
    repeats the interval is zero wide and the row would read "better"; over prompts (three gain a token, one
    loses one) it straddles zero."""
    old = _side(tmp_path / "a", _requests(UNEVEN), 0.5)
    new = _side(tmp_path / "b", _requests([[3, 3]] * 3 + [[3, 2]] + [[1, 0]] * 3 + [[0, 0]]), 0.5417, weights="d2")
    row = _acceptance(old, new)
    assert any(c.name == "draft weights" for c in row.changed)
    assert row.method == "paired-bootstrap" and (row.n_old, row.n_new) == (8, 8)
    assert row.ci_low is not None and row.ci_high is not None and row.ci_low <= 0 < row.ci_high
    assert row.verdict == "within noise"


def test_a_draft_better_on_every_prompt_is_better(tmp_path: Path) -> None:
    """Every prompt accepts more with the new draft: the paired interval over prompts lies above zero."""
    old = _side(tmp_path / "a", _requests([[1, 1]] * 4 + [[0, 1]] * 4), 0.25)
    new = _side(tmp_path / "b", _requests([[2, 2]] * 4 + [[1, 2]] * 4), 0.5833, weights="d2")
    row = _acceptance(old, new)
    assert row.ci_low is not None and row.ci_low > 0 and row.verdict == "better"


def test_an_edited_requests_file_is_refused(tmp_path: Path) -> None:
    """A per-request file edited after the fact: compare refuses the ledger (LedgerError, exit 6), never judges."""
    old = _side(tmp_path / "a", _requests(UNEVEN), 0.5)
    new = _side(tmp_path / "b", _requests(UNEVEN), 0.5, weights="d2")
    (path,) = (new / "ref").glob("*.requests.jsonl")
    path.write_bytes(path.read_bytes().replace(b"[3,3]", b"[3,2]", 1))
    with pytest.raises(LedgerError):
        _acceptance(old, new)
