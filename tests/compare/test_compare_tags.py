"""`hfrelease compare` of two release tags read back from the built-in Hub with the real huggingface_hub client."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hfrelease.compare import compare_family
from hfrelease.errors import HubError, UsageError
from hfrelease.hub import HubServer
from hfrelease.ledger.store import Ledger
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from hfrelease.publish.readback import verify_family
from tests.conftest import CliRun
from tests.ledger_pairs import gate_record, write_ledger, write_speed
from tests.publish_family import TOKEN, fake_plugin_check, set_version

pytestmark = pytest.mark.usefixtures("publish_isolation")


def _release(family: Path, api: HfApi, version: str, accuracy: float, seed: str) -> None:
    """Publish `version` of the tiny family with a ledger of one gate record per published quant, and a speed
    record of q0 served with q1 as its draft whose repeats scale with `accuracy`."""
    shutil.rmtree(family / "results", ignore_errors=True)
    set_version(family, version)
    ledger = write_ledger(family / "results", *(gate_record(family="tiny", artifact=a, accuracy=accuracy, seed=seed)
                                                for a in ("q0", "q1")))
    write_speed(ledger, family="tiny", artifact="q0", draft="q1", draft_weights=seed,
                throughputs=tuple(100 * accuracy + d for d in (0.0, 3.0, -2.0)), acceptances=(0.4, 0.41, 0.39))
    report = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check)
    assert report.outcome is not None and report.outcome.status == "published"


def test_two_release_tags_compare_from_the_ledgers_they_ship(
    family: Path, api: HfApi, hub: HubServer, tmp_path: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1.0 and v1.1 are read from each published repo's ledger/; the numbers equal the local ledgers'."""
    _release(family, api, "1.0", 0.5, "a")
    shutil.copytree(family / "results", tmp_path / "v1.0")
    _release(family, api, "1.1", 0.9, "b")
    manifest = load_manifest(family)
    comparison = compare_family("v1.0", "hub:v1.1", manifest=manifest, endpoint=hub.url, token=TOKEN)
    local = compare_family(str(tmp_path / "v1.0"), str(family / "results"), manifest=None)
    assert [(r.artifact, r.metric, r.old, r.new, r.ci_low, r.ci_high, r.verdict) for r in comparison.rows] == [
        (r.artifact, r.metric, r.old, r.new, r.ci_low, r.ci_high, r.verdict) for r in local.rows]
    assert [(r.kind, r.artifact) for r in comparison.rows] == [("gate", "q0"), ("gate", "q1"), ("speed", "q0"),
                                                              ("speed", "q0")]
    assert comparison.rows[0].verdict == "better"
    # The speed rows' intervals come from the raw repeats each release ships beside its records (ledger/).
    speed = [r for r in comparison.rows if r.kind == "speed"]
    assert all(r.ci_low is not None and (r.n_old, r.n_new) == (3, 3) for r in speed)
    # No key of either release was recorded in two sessions: a throughput change is not judged against session
    # noise it did not measure (issue 24).
    assert speed[0].metric == "output_throughput" and speed[0].verdict == "session noise unmeasured"
    # verify downloads v1.1 back and holds the repeats to the MANIFEST, the Hub's blob ids and the local bundle.
    verified = verify_family(manifest, endpoint=hub.url, token=TOKEN, out_dir=tmp_path / "verified")
    q0 = next(v for v in verified if v.artifact_id == "q0")
    assert all(not v.problems for v in verified) and q0.local_bundle is not None
    shipped = {p.name for p in (q0.directory / "ledger").glob("*.bench.jsonl")}
    assert len(shipped) == 3 and shipped == {p.name for p in (family / "results" / "q0").glob("*.bench.jsonl")}
    assert Ledger(family / "results").records()  # the work tree's ledger is read, not changed
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    code, out, _ = cli(["compare", "v1.0", "v1.1", "--manifest", str(family), "--json"])
    assert code == 0 and [r["new"] for r in json.loads(out)["rows"]] == [r.new for r in comparison.rows]
    with pytest.raises(UsageError, match=r"no release tag 'v9\.9'"):
        compare_family("v9.9", "v1.1", manifest=manifest, endpoint=hub.url, token=TOKEN)
    code, _, err = cli(["compare", "v9.9", "v1.1", "--manifest", str(family)])
    assert code == 2 and "no release tag" in err


def test_a_failing_hub_is_exit_7_not_a_wrong_tag(family: Path, api: HfApi, hub: HubServer) -> None:
    """A Hub that refuses the token is the Hub's failure (exit 7), not reported as an unknown tag."""
    _release(family, api, "1.0", 0.5, "a")
    with pytest.raises(HubError) as info:
        compare_family("v1.0", "v1.0", manifest=load_manifest(family), endpoint=hub.url, token="hf_wrong_token_000000")
    assert info.value.status in (401, 403)


def test_a_repo_without_the_tag_has_its_rows_on_one_side(family: Path, api: HfApi, hub: HubServer) -> None:
    """An artifact not released in OLD (its repo lacks the tag) is listed as new; the others still compare."""
    _release(family, api, "1.0", 0.5, "a")
    _release(family, api, "1.1", 0.9, "b")
    manifest = load_manifest(family)
    q1 = next(a.repo for a in manifest.artifact if a.id == "q1")
    api.delete_tag(q1, tag="v1.0")
    comparison = compare_family("v1.0", "v1.1", manifest=manifest, endpoint=hub.url, token=TOKEN)
    assert {r.artifact for r in comparison.rows} == {"q0"}
    assert [(r.side, r.kind, r.artifact) for r in comparison.one_sided] == [("new", "gate", "q1")]


def _cite(family: Path, artifact: str, records: list[str]) -> None:
    """A rendered card of `artifact` whose number provenance cites `records` (`<id>/<name>`), as render writes it."""
    card = family / artifact / "README.md"
    cited = ", ".join(f"`{name}`" for name in records)
    card.write_text(card.read_text().split("\n<!-- provenance:begin -->")[0]
                    + f"\n<!-- provenance:begin -->\n- `gate.x.{artifact}.delta` = 0: delta; {cited}\n"
                    "<!-- provenance:end -->\n")


def test_two_release_tags_list_the_unpublished_references_rows(family: Path, api: HfApi, hub: HubServer) -> None:
    """The reference (`publish = false`) ships in no repo of its own: its records that the quants' cards cite
    ship in their repos (ledger/ref/), so a comparison of two tags lists its rows too, each read once
    though two repos ship it (issue 27, part 5)."""
    from hfrelease.ledger.store import record_name

    for version, accuracy, seed in (("1.0", 0.5, "a"), ("1.1", 0.9, "b")):
        shutil.rmtree(family / "results", ignore_errors=True)
        set_version(family, version)
        records = [gate_record(family="tiny", artifact=a, accuracy=accuracy, seed=seed) for a in ("ref", "q0", "q1")]
        write_ledger(family / "results", *records)
        names = {r.artifact_id: record_name(r, r.to_json()) for r in records}
        for quant in ("q0", "q1"):
            _cite(family, quant, [names[quant], names["ref"]])
        report = publish_family(load_manifest(family), api=api, plugin_checker=fake_plugin_check)
        assert report.outcome is not None and report.outcome.status == "published"
    comparison = compare_family("v1.0", "v1.1", manifest=load_manifest(family), endpoint=hub.url, token=TOKEN)
    assert sorted((r.kind, r.artifact) for r in comparison.rows) == [("gate", "q0"), ("gate", "q1"), ("gate", "ref")]
