"""A release's attestation: the Sigstore bundle (`MANIFEST.sigstore.json`) of its MANIFEST's build provenance.

The publish job attests every repo's MANIFEST with `actions/attest` (SLSA provenance in an in-toto
statement, in a DSSE envelope signed with a short-lived Sigstore certificate for the workflow run) and ships
the bundle beside MANIFEST. Since MANIFEST lists every other file with its sha256, a statement naming the
MANIFEST's sha256 covers the whole repo. `hfrelease verify` checks, for a repo that carries one:

- always, offline: that the statement is for *this* MANIFEST (a subject with its sha256); a repo whose
  MANIFEST was changed after the release, or an attestation copied from another release, fails;
- with `attested_by` (`hfrelease verify --attested-by OWNER/REPO`): the signature itself, with
  sigstore-python against the public-good Sigstore instance, from a GitHub Actions run of that repository.
  That needs the `sigstore` package (imported only then) and network access to Sigstore's trust root;
  `gh attestation verify MANIFEST --bundle MANIFEST.sigstore.json --repo OWNER/REPO` is the equivalent
  (and the way for private repositories, which GitHub signs with its own Sigstore instance).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from hfrelease.errors import UsageError

IN_TOTO = "application/vnd.in-toto+json"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"


def statement(bundle: bytes) -> dict[str, Any]:
    """The in-toto statement inside a Sigstore bundle's DSSE envelope (not verified); ValueError if malformed."""
    try:
        envelope = json.loads(bundle)["dsseEnvelope"]
        if envelope.get("payloadType") != IN_TOTO:
            raise ValueError(f"its payload is {envelope.get('payloadType')!r}, not an in-toto statement")
        data = json.loads(base64.b64decode(envelope["payload"], validate=True))
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError, ValueError) as error:
        raise ValueError(f"not a Sigstore bundle of an in-toto statement ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("subject"), list):
        raise ValueError("the in-toto statement has no subject list")
    return data


def subject_digests(data: dict[str, Any]) -> dict[str, str]:
    """The statement's subjects: sha256 -> name."""
    return {str(s["digest"]["sha256"]): str(s.get("name", "")) for s in data["subject"]
            if isinstance(s, dict) and isinstance(s.get("digest"), dict) and "sha256" in s["digest"]}


def binding_problems(data: dict[str, Any], manifest: bytes) -> list[str]:
    """Why the statement does not attest this MANIFEST (none: it does)."""
    sha256 = hashlib.sha256(manifest).hexdigest()
    if sha256 in subject_digests(data):
        return []
    named = ", ".join(f"{name or '?'} ({digest[:12]})" for digest, name in subject_digests(data).items()) or "none"
    return [f"MANIFEST.sigstore.json: attests {named}, not this MANIFEST (sha256 {sha256[:12]}): the files are not "
            "the ones the release workflow attested"]


def verify_signature(bundle: bytes, *, repository: str) -> dict[str, Any]:
    """The statement, once sigstore has verified its signature for a GitHub Actions run of `repository`."""
    import importlib

    try:  # not a dependency of hfrelease: only this check needs it (sigstore-python >= 4)
        models = importlib.import_module("sigstore.models")
        verify = importlib.import_module("sigstore.verify")
        policies = importlib.import_module("sigstore.verify.policy")
    except ImportError:
        raise UsageError("checking an attestation's signature needs the sigstore package",
                         hint="pip install 'sigstore>=4', or check it with `gh attestation verify MANIFEST --bundle "
                              "MANIFEST.sigstore.json --repo OWNER/REPO`.") from None
    policy = policies.AllOf([policies.OIDCIssuerV2(GITHUB_ISSUER), policies.GitHubWorkflowRepository(repository)])
    payload_type, payload = verify.Verifier.production().verify_dsse(models.Bundle.from_json(bundle), policy)
    if payload_type != IN_TOTO:
        raise ValueError(f"the signed payload is {payload_type!r}, not an in-toto statement")
    data = json.loads(payload)
    if not isinstance(data, dict) or not isinstance(data.get("subject"), list):
        raise ValueError("the signed in-toto statement has no subject list")
    return data


def attestation_problems(bundle: bytes, manifest: bytes, *, attested_by: str | None = None) -> list[str]:
    """Everything wrong with a repo's attestation of its MANIFEST (none: it holds)."""
    try:
        data = verify_signature(bundle, repository=attested_by) if attested_by else statement(bundle)
    except UsageError:
        raise
    except Exception as error:  # sigstore's VerificationError, a malformed bundle
        return [f"MANIFEST.sigstore.json: {error}"]
    return binding_problems(data, manifest)
