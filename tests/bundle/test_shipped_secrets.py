"""Every shipped file's content is scanned for credentials, gzip decompressed (issue 28, "A token is published").

A gate whose samples carry a token and exceed 256 KiB spills them to `*.samples.jsonl.gz` beside its record; the
allowlist used to check only the gzip magic there, so bundle and publish shipped the token. The records here are
written by the ledger itself (tests/ledger_pairs.py), as a gate run writes them; commands run through the CLI.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

import pytest

from hfrelease.bundle import BundleRefusedError, bundle_family
from hfrelease.files import allowlist
from hfrelease.ledger.record import Sample
from hfrelease.ledger.store import SPILL_BYTES, Ledger
from hfrelease.manifest import load_manifest
from tests.conftest import CliRun
from tests.ledger_pairs import gate_record
from tests.publish_family import fake_plugin_check

TOKEN = "hf_" + "Sp1L" * 8  # shaped like a Hugging Face token (redact's pattern), never a real one
SECRET = "plainsecret-0123456789-abcdef"  # no token shape: a secret only as the value of a secret-named variable
SAMPLES = 200  # responses of 2,000 characters: about 400 KiB of JSON lines, over SPILL_BYTES


def _spill(family: Path, planted: str | None) -> str:
    """A gate record of q0 written by the ledger, its samples spilled to gzip; the last sample's response ends
    with `planted` (deep in the decompressed stream). Returns the samples file's path as check places it."""
    record = gate_record(family="tiny", artifact="q0", accuracy=0.5, n=SAMPLES)
    samples = [Sample(**{**s.model_dump(), "response": "x" * 2000}) for s in record.samples]
    if planted is not None:
        samples[-1] = Sample(**{**samples[-1].model_dump(), "response": "x" * 1000 + f" {planted}"})
    stored = Ledger(family / "results").write(record.model_copy(update={"samples": tuple(samples)}))
    [spilled] = (family / "results" / "q0").glob("*.samples.jsonl.gz")
    assert len(gzip.decompress(spilled.read_bytes())) > SPILL_BYTES and str(planted) not in stored.read_text()
    return f"results/q0/{spilled.name}"


def _refused(cli: CliRun, family: Path, where: str, secret: str) -> str:
    """check and bundle (CLI) both refuse with exit 3 at `where`, never printing `secret`; the problem's text."""
    code, out, err = cli(["check", str(family), "--json", "--offline"])
    problems = {p["location"]: p["message"] for p in json.loads(out).get("problems", [])}
    assert code == 3 and where in problems, problems
    code, bundle_out, bundle_err = cli(["bundle", str(family), "--json"])
    assert code == 3 and bundle_out == "" and where.rsplit("/", 1)[1] in bundle_err
    assert secret not in out + err + bundle_out + bundle_err
    return problems[where]


@pytest.mark.parametrize("planted", ["token-shaped", "secret value"])
def test_spilled_samples_holding_a_secret_are_refused(
    cli: CliRun, family: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """A samples .jsonl.gz over 256 KiB whose last response carries an hf_ token, or the value of a secret
    variable of the environment: check and bundle refuse it (exit 3), naming the file, never the secret."""
    secret = TOKEN
    if planted == "secret value":
        monkeypatch.setenv("DEPLOY_API_KEY", SECRET)
        secret = SECRET
    where = _spill(family, secret)
    message = _refused(cli, family, where, secret)
    assert "decompressed" in message and "access token" in message


def test_clean_spilled_samples_ship(family: Path) -> None:
    """Control: the same samples without a secret pass, and ship beside their record."""
    where = _spill(family, None)
    [q0] = [b for b in bundle_family(load_manifest(family), plugin_checker=fake_plugin_check).repos
            if b.artifact_id == "q0"]
    assert "ledger/" + where.rsplit("/", 1)[1] in {f.path for f in q0.files}


def test_samples_inflating_past_the_limit_are_refused_unread(
    cli: CliRun, family: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decompression bomb named as a samples file (64 KiB of gzip, 64 MiB inflated) is refused with a clear
    problem once it passes `SAMPLES_LIMIT` (here lowered to 2 MiB), the stream read in bounded chunks and no
    further than the chunk that crossed the limit."""
    monkeypatch.setattr(allowlist, "SAMPLES_LIMIT", 2 * 1024 * 1024)
    name = "gate-arith-0123456789ab-0123456789ab.samples.jsonl.gz"
    (family / "results" / "q0").mkdir(parents=True)
    (family / "results" / "q0" / name).write_bytes(gzip.compress(b"x" * (64 * 1024 * 1024) + TOKEN.encode()))
    read: list[int] = []
    real_read = gzip.GzipFile.read

    def counted(self: gzip.GzipFile, size: int = -1) -> bytes:
        assert size > 0, "an unbounded read"
        data = real_read(self, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", counted)
    code, out, _ = cli(["check", str(family), "--json", "--offline"])
    problems = {p["location"]: p["message"] for p in json.loads(out).get("problems", [])}
    assert code == 3 and "exceeds 2 MiB" in problems[f"results/q0/{name}"]
    assert sum(read) <= 2 * 1024 * 1024 + allowlist.CHUNK and TOKEN not in out


def test_damaged_gzip_is_refused(cli: CliRun, family: Path) -> None:
    """A samples file with gzip's magic but a cut-off stream is refused as not valid gzip, before the ledger."""
    where = _spill(family, None)
    path = family / where
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    code, out, _ = cli(["check", str(family), "--json", "--offline"])
    problems = {p["location"]: p["message"] for p in json.loads(out).get("problems", [])}
    assert code == 3 and "not a valid gzip file" in problems[where]


def _png_with_text(key: str, value: str) -> bytes:
    """A PNG signature, then a tEXt chunk (PNG's own metadata, Latin-1) and IEND."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1")) + chunk(
        b"IEND", b"")


def test_plot_image_metadata_holding_a_token_is_refused(family: Path) -> None:
    """A rendered plot whose PNG text metadata carries a token is refused (its bytes are scanned too)."""
    plots = family / "q0" / "plots"
    plots.mkdir()
    (plots / "quality.png").write_bytes(_png_with_text("Comment", f"rendered with {TOKEN}"))
    with pytest.raises(BundleRefusedError) as caught:
        bundle_family(load_manifest(family), plugin_checker=fake_plugin_check)
    [refusal] = [r.render() for r in caught.value.refusals]
    assert "quality.png" in refusal and "access token" in refusal and TOKEN not in refusal
