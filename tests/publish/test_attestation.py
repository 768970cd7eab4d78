"""`hfrelease verify` and a release's attestation: a repo whose MANIFEST is not the attested one is rejected."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from hfrelease.bundle import MANIFEST_NAME, bundle_family, write_bundle
from hfrelease.hub import HubServer
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family
from hfrelease.publish.attestation import IN_TOTO, attestation_problems, statement
from hfrelease.publish.readback import verify_family
from tests.publish_family import TOKEN, fake_plugin_check


def sigstore_bundle(subjects: dict[str, bytes]) -> bytes:
    """A Sigstore bundle shaped as actions/attest writes it: SLSA provenance of `subjects` in a DSSE envelope
    (its signature and certificate are placeholders: only sigstore's verifier, online, checks those)."""
    payload = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://slsa.dev/provenance/v1",
               "subject": [{"name": name, "digest": {"sha256": hashlib.sha256(data).hexdigest()}}
                           for name, data in subjects.items()],
               "predicate": {"buildDefinition": {"externalParameters": {"workflow": {
                   "repository": "https://github.com/acme/family", "path": ".github/workflows/release.yml"}}}}}
    return json.dumps({"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
                       "verificationMaterial": {"certificate": {"rawBytes": ""}},
                       "dsseEnvelope": {"payload": base64.b64encode(json.dumps(payload).encode()).decode(),
                                        "payloadType": IN_TOTO, "signatures": [{"sig": ""}]}}).encode()


def test_the_attestation_must_name_this_manifest() -> None:
    """A statement whose subjects include the MANIFEST's sha256 holds; another MANIFEST's, or garbage, does not."""
    manifest = b"# hfrelease MANIFEST 1\n" + b"0" * 64 + b" 3 a.txt\n"
    bundle = sigstore_bundle({"q0/MANIFEST": manifest, "q1/MANIFEST": b"other"})
    assert statement(bundle)["predicateType"] == "https://slsa.dev/provenance/v1"
    assert attestation_problems(bundle, manifest) == []
    (problem,) = attestation_problems(bundle, manifest + b"1" * 64 + b" 4 evil.py\n")
    assert "not this MANIFEST" in problem and "q0/MANIFEST" in problem
    (problem,) = attestation_problems(b'{"dsseEnvelope": {"payloadType": "text/plain", "payload": ""}}', manifest)
    assert "not a Sigstore bundle of an in-toto statement" in problem


def test_verify_rejects_a_release_changed_after_its_attestation(family: Path, hub: HubServer, api: HfApi,
                                                                tmp_path: Path) -> None:
    """Published with its attestation, a repo verifies; a file and its MANIFEST line replaced later (tag moved)
    pass the MANIFEST and Hub checks but fail the attestation, even with no local bundle to compare with."""
    out = tmp_path / "bundle"
    write_bundle(bundle_family(load_manifest(family), plugin_checker=fake_plugin_check), out)
    attested = {f"{d.name}/{MANIFEST_NAME}": (d / MANIFEST_NAME).read_bytes() for d in sorted(out.iterdir())}
    attestation = tmp_path / "attestation.json"
    attestation.write_bytes(sigstore_bundle(attested))
    manifest = load_manifest(family, check_files=False)
    report = publish_family(manifest, api=api, from_bundle=out, attestation=attestation)
    assert report.outcome is not None and report.outcome.status == "published"
    empty = tmp_path / "no-local-bundle"
    empty.mkdir()

    def verify(where: str) -> dict[str, tuple[str, ...]]:
        verified = verify_family(manifest, endpoint=hub.url, token=TOKEN, out_dir=tmp_path / where)
        assert all("attestation" in v.compared_with for v in verified)
        return {v.repo: v.problems for v in verified}

    assert verify("first") == {plan.repo: () for plan in report.plan.repos}

    # Someone with push access replaces config.json and its MANIFEST line, and moves the tag.
    repo = report.plan.repos[0].repo
    lines = (out / report.plan.repos[0].bundle.artifact_id / MANIFEST_NAME).read_text().splitlines()
    evil = b'{"architectures": ["Evil"]}'
    lines = [f"{hashlib.sha256(evil).hexdigest()} {len(evil)} config.json" if line.endswith(" config.json") else line
             for line in lines]
    commit = api.create_commit(repo, [CommitOperationAdd("config.json", evil),
                                      CommitOperationAdd(MANIFEST_NAME, ("\n".join(lines) + "\n").encode())],
                               commit_message="update")
    api.delete_tag(repo, tag="v1.0")
    api.create_tag(repo, tag="v1.0", revision=commit.oid)
    for local in (family / ".hfrelease").rglob(MANIFEST_NAME):
        local.unlink()  # no copy kept off the Hub: only the attestation can tell
    problems = verify("second")
    assert [p for p in problems[repo] if "not this MANIFEST" in p], problems[repo]
    assert all(not found for other, found in problems.items() if other != repo)


def test_checking_the_signature_without_sigstore_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """--attested-by needs the sigstore package: without it, a usage error naming it (not a traceback)."""
    from hfrelease.errors import UsageError

    for name in ("sigstore", "sigstore.models", "sigstore.verify", "sigstore.verify.policy"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails, installed or not
    with pytest.raises(UsageError) as info:
        attestation_problems(sigstore_bundle({"MANIFEST": b"x"}), b"x", attested_by="acme/family")
    assert "sigstore" in info.value.message and "gh attestation verify" in (info.value.hint or "")
