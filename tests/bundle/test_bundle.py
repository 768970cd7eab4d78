"""The bundle plan: which files each repo holds, MANIFEST, and every refusal (no Hub, no processes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hfrelease.bundle import (
    MANIFEST_NAME,
    BundleRefusedError,
    bundle_family,
    parse_manifest,
    write_bundle,
)
from hfrelease.files.hashing import HashCache
from hfrelease.manifest import load_manifest
from tests.publish_family import fake_plugin_check, make_family, write_weights


def _bundle(family: Path, cache: HashCache | None = None):  # type: ignore[no-untyped-def]
    return bundle_family(load_manifest(family), cache=cache, plugin_checker=fake_plugin_check)


def _refusals(family: Path) -> list[str]:
    with pytest.raises(BundleRefusedError) as caught:
        _bundle(family)
    return [r.render() for r in caught.value.refusals]


def test_bundle_lists_every_file_of_each_published_repo(family: Path) -> None:
    """Weights, config, tokenizer, card, citation, declared file, plugin and MANIFEST; the reference is skipped."""
    bundle = _bundle(family)
    assert [r.artifact_id for r in bundle.repos] == ["q0", "q1"]
    assert bundle.tag == "v1.0"
    paths = {f.path: f.role for f in bundle.repos[0].files}
    assert paths == {
        "model.safetensors": "weights", "config.json": "config", "generation_config.json": "generation-config",
        "tokenizer.json": "tokenizer", "tokenizer_config.json": "tokenizer", "chat_template.jinja": "tokenizer",
        "README.md": "card", "CITATION.cff": "citation", "train_command.txt": "declared",
        "vllm_plugin/pyproject.toml": "plugin", "vllm_plugin/tiny_plugin/__init__.py": "plugin",
        MANIFEST_NAME: "manifest",
    }  # fmt: skip


def test_manifest_lists_sha256_and_size_of_every_other_file(family: Path) -> None:
    """MANIFEST's entries equal sha256sum and size of each file on disk, and it is byte-stable across runs."""
    repo = _bundle(family).repos[0]
    entries = parse_manifest(repo.manifest.read())
    assert set(entries) == {f.path for f in repo.files} - {MANIFEST_NAME}
    for item in repo.files:
        if item.source is not None:
            data = item.source.read_bytes()
            assert entries[item.path].sha256 == hashlib.sha256(data).hexdigest()
            assert entries[item.path].size == len(data)
    assert _bundle(family).repos[0].manifest.read() == repo.manifest.read()
    assert f"weights sha256: {repo.content_hash}" in repo.manifest.read().decode()


def test_each_weight_byte_is_hashed_once(family: Path, tmp_path: Path) -> None:
    """A cold bundle reads each file once (the shared plugin once for all repos); a warm one reads nothing."""
    cache = HashCache(tmp_path / "c.json")
    first = _bundle(family, cache)
    total = sum({f.source: f.size for r in first.repos for f in r.files if f.source is not None}.values())
    assert first.bytes_hashed == total
    assert _bundle(family, cache).bytes_hashed == 0


def test_missing_card_is_noted_not_fatal(tmp_path: Path) -> None:
    """Before `hfrelease render`, the bundle has no README.md and says so in its notes."""
    family = make_family(tmp_path / "f", card=False)
    repo = _bundle(family).repos[0]
    assert repo.file("README.md") is None
    assert any("hfrelease render" in note for note in repo.notes)


def test_pickle_weights_are_refused(family: Path) -> None:
    """A pytorch_model.bin next to the safetensors is refused, with the conversion as the fix."""
    (family / "checkpoints" / "q0" / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    [refusal] = _refusals(family)
    assert "pytorch_model.bin" in refusal and "pickle" in refusal and "safetensors" in refusal


def test_env_file_is_refused(family: Path) -> None:
    """A .env in the checkpoint is a credential file: refused, whatever it holds."""
    (family / "checkpoints" / "q1" / ".env").write_text("X=1\n")
    [refusal] = _refusals(family)
    assert ".env" in refusal and "credential" in refusal


def test_token_pasted_into_a_declared_file_is_refused(family: Path) -> None:
    """train_command.txt holding an hf_ token is refused, and the message does not repeat the token."""
    token = "hf_" + "Q" * 30
    (family / "checkpoints" / "q0" / "train_command.txt").write_text(f"HF_TOKEN={token} python train.py\n")
    [refusal] = _refusals(family)
    assert "train_command.txt" in refusal and "token" in refusal and token not in refusal


def test_symlink_out_of_the_artifact_is_refused(family: Path, tmp_path: Path) -> None:
    """A weight file linking outside the checkpoint directory is refused, naming where it points."""
    outside = tmp_path / "elsewhere.safetensors"
    write_weights(outside, 64, seed=9)
    (family / "checkpoints" / "q0" / "extra.safetensors").symlink_to(outside)
    [refusal] = _refusals(family)
    assert "extra.safetensors" in refusal and "outside" in refusal


def test_symlink_inside_the_artifact_is_followed(family: Path) -> None:
    """A link to a file in the same checkpoint is fine: it ships as a regular file."""
    checkpoint = family / "checkpoints" / "q0"
    (checkpoint / "alias.safetensors").symlink_to(checkpoint / "model.safetensors")
    repo = _bundle(family).repos[0]
    assert repo.file("alias.safetensors") is not None


def test_undeclared_file_is_refused_with_how_to_declare_it(family: Path) -> None:
    """notes.txt in the checkpoint is neither a model file nor declared: the fix names `files`."""
    (family / "checkpoints" / "q0" / "notes.txt").write_text("hello\n")
    [refusal] = _refusals(family)
    assert "notes.txt" in refusal and 'add "checkpoints/q0/notes.txt" to files' in refusal


def test_vcs_and_cache_directories_are_refused(family: Path) -> None:
    """A .git directory and huggingface_hub's .cache in a checkpoint are refused."""
    (family / "checkpoints" / "q0" / ".git").mkdir()
    (family / "checkpoints" / "q1" / ".cache" / "huggingface").mkdir(parents=True)
    refusals = _refusals(family)
    assert any(".git" in r and "version-control" in r for r in refusals)
    assert any(".cache" in r and "cache directory" in r for r in refusals)


def test_every_refusal_is_reported_at_once(family: Path) -> None:
    """Four problems in two artifacts give one error listing all four."""
    (family / "checkpoints" / "q0" / "a.pt").write_bytes(b"x")
    (family / "checkpoints" / "q0" / "token").write_text("x")
    (family / "checkpoints" / "q1" / "stray.csv").write_text("x")
    (family / "q1" / "draft.md").write_text("x")
    assert len(_refusals(family)) == 4


def test_plugin_build_litter_is_skipped(family: Path) -> None:
    """build/, *.egg-info and __pycache__ that pip leaves in the plugin tree do not ship."""
    plugin = family / "vllm_plugin"
    (plugin / "build" / "lib").mkdir(parents=True)
    (plugin / "build" / "lib" / "x.py").write_text("")
    (plugin / "tiny_vllm_plugin.egg-info").mkdir()
    (plugin / "tiny_vllm_plugin.egg-info" / "PKG-INFO").write_text("")
    (plugin / "tiny_plugin" / "__pycache__").mkdir()
    (plugin / "tiny_plugin" / "__pycache__" / "x.pyc").write_bytes(b"")
    paths = {f.path for f in _bundle(family).repos[0].files if f.path.startswith("vllm_plugin/")}
    assert paths == {"vllm_plugin/pyproject.toml", "vllm_plugin/tiny_plugin/__init__.py"}


def test_ledger_records_ship_under_ledger(family: Path) -> None:
    """A valid ledger record of the artifact is bundled as ledger/<name>; a damaged one stops the bundle."""
    from hfrelease.errors import LedgerError
    from hfrelease.ledger.store import Ledger

    bad = family / "results" / "q0" / "gate-x-000000000000-000000000000.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{}")
    with pytest.raises(LedgerError):
        _bundle(family)
    bad.unlink()
    assert Ledger(family / "results").records(artifact_id="q0") == []
    assert _bundle(family).repos[0].notes == ()


def test_raw_repeats_a_speed_record_names_ship_beside_it(family: Path, tmp_path: Path) -> None:
    """Each `vllm bench serve` repeat a speed record names ships as ledger/<name> with its bytes and MANIFEST line;
    a repeats file or a /metrics snapshot no record names stays local."""
    from hfrelease.ledger.store import Ledger
    from tests.ledger_pairs import write_speed

    record = write_speed(Ledger(family / "results"), family="tiny", artifact="q0", draft="q1",
                         throughputs=(100.0, 104.0, 98.0), acceptances=(0.4, 0.41, 0.39))
    results = family / "results" / "q0"
    (results / "speed-chat-000000000000-111111111111.bench.jsonl").write_text('{"output_throughput": 1}\n')
    (results / "speed-chat-000000000000-222222222222.metrics.txt").write_text("vllm:num_drafts 1\n")
    repo = _bundle(family).repos[0]
    files = {f.path: f for f in repo.files if f.path.startswith("ledger/")}
    repeats = record.extra["raw"]
    assert isinstance(repeats, list) and len(repeats) == 3
    assert set(files) == {f"ledger/{n}" for n in repeats} | {f"ledger/{next(results.glob('speed-*.json')).name}"}
    for name in repeats:
        item = files[f"ledger/{name}"]
        assert item.read() == (results / name).read_bytes() and item.role == "ledger-record"
    assert any("speed-chat-000000000000-111111111111.bench.jsonl" in note for note in repo.notes)
    [written, _] = write_bundle(_bundle(family), tmp_path / "out")
    listed = {line.split()[-1] for line in (written / MANIFEST_NAME).read_text().splitlines() if line.strip()}
    assert {f"ledger/{n}" for n in repeats} <= listed


def test_every_raw_file_a_record_names_ships_beside_it(family: Path) -> None:
    """The /metrics snapshot and per-request outcomes a speed record names ship with it (compare from a release
    tag refuses a side whose records name files it lacks); one no record names stays local."""
    import hashlib

    from hfrelease.ledger.store import Ledger
    from tests.ledger_pairs import write_speed

    ledger = Ledger(family / "results")
    record = write_speed(ledger, family="tiny", artifact="q0", draft="q1", throughputs=(100.0, 104.0, 98.0),
                         acceptances=(0.4, 0.41, 0.39))
    results = family / "results" / "q0"
    named: dict[str, str] = {}
    for key, kind, text in (("metrics_raw", "metrics.txt", "vllm:num_drafts 1\n"),
                            ("requests_raw", "requests.jsonl", '{"prompt": 0}\n')):
        name = f"speed-chat-{record.input_key[:12]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.{kind}"
        (results / name).write_text(text)
        named[key] = name
    for path in results.glob("speed-*.json"):
        path.unlink()
    ledger.write(record.model_copy(update={"extra": {**record.extra, **{k: [n] for k, n in named.items()}}}))
    (results / "speed-chat-000000000000-222222222222.metrics.txt").write_text("vllm:num_drafts 2\n")
    repo = _bundle(family).repos[0]
    shipped = {f.path for f in repo.files if f.path.startswith("ledger/")}
    assert {f"ledger/{n}" for n in named.values()} <= shipped
    assert "ledger/speed-chat-000000000000-222222222222.metrics.txt" not in shipped
    assert any("speed-chat-000000000000-222222222222.metrics.txt" in note for note in repo.notes)


def test_a_repeats_file_that_is_not_the_measured_one_stops_the_bundle(family: Path) -> None:
    """A repeats file whose bytes no longer match the sha256 in its name is a damaged ledger (exit 6), not shipped."""
    from hfrelease.errors import LedgerError
    from hfrelease.ledger.store import Ledger
    from tests.ledger_pairs import write_speed

    record = write_speed(Ledger(family / "results"), family="tiny", artifact="q0", draft="q1",
                         throughputs=(100.0, 104.0, 98.0))
    assert isinstance(record.extra["raw"], list)
    edited = family / "results" / "q0" / record.extra["raw"][0]
    edited.write_text(edited.read_text().replace("100.0", "190.0"))
    with pytest.raises(LedgerError, match="sha256"):
        _bundle(family)


def test_write_bundle_lays_out_each_repo(family: Path, tmp_path: Path) -> None:
    """`--out` writes each repo's tree with identical bytes and its MANIFEST."""
    bundle = _bundle(family)
    [first, _] = write_bundle(bundle, tmp_path / "out")
    for item in bundle.repos[0].files:
        assert (first / item.path).read_bytes() == item.read()


def test_hash_cache_shared_by_threads_keeps_every_digest(tmp_path: Path) -> None:
    """Eight threads hashing through one HashCache: every digest is kept and saved, every byte counted once."""
    from concurrent.futures import ThreadPoolExecutor

    from hfrelease.files.hashing import hash_files

    names = [f"shard-{n}.safetensors" for n in range(32)]
    for number, name in enumerate(names):
        write_weights(tmp_path / "w" / name, 50_000 + number, seed=number)
    cache = HashCache(tmp_path / "c.json")
    with ThreadPoolExecutor(max_workers=8) as pool:
        digests = list(pool.map(lambda name: hash_files(tmp_path / "w", [name], cache)[0], names))
    sizes = [(tmp_path / "w" / name).stat().st_size for name in names]
    assert cache.bytes_read == sum(sizes)
    assert [d.sha256 for d in digests] == [hashlib.sha256((tmp_path / "w" / n).read_bytes()).hexdigest() for n in names]
    reloaded = HashCache(tmp_path / "c.json")  # what the last save wrote holds all 32
    assert [d.sha256 for d in hash_files(tmp_path / "w", names, reloaded)] == [d.sha256 for d in digests]
    assert reloaded.bytes_read == 0


def test_every_eval_ever_records_ship_with_the_card(family: Path) -> None:
    """The rendered card's Every Eval Ever records (nested as that project's datastore nests them) are
    published with it; any other file nested in a rendered folder, or another suffix there, is still refused."""
    folder = family / "q0" / "every_eval_ever" / "data" / "g" / "tiny" / "q0"
    folder.mkdir(parents=True)
    (folder / "0b26e9a8-e23d-47ba-9706-1dc6e34db6c4.json").write_text('{"schema_version": "0.3.0"}\n')
    (folder / "0b26e9a8-e23d-47ba-9706-1dc6e34db6c4_samples.jsonl").write_text('{"sample_id": "0"}\n')
    roles = {f.path: f.role for f in _bundle(family).repos[0].files if f.path.startswith("every_eval_ever/")}
    assert roles == {"every_eval_ever/data/g/tiny/q0/0b26e9a8-e23d-47ba-9706-1dc6e34db6c4.json": "eval-record",
                     "every_eval_ever/data/g/tiny/q0/0b26e9a8-e23d-47ba-9706-1dc6e34db6c4_samples.jsonl": "eval-record"}
    (folder / "notes.txt").write_text("hello\n")
    (family / "q0" / "plots" / "old").mkdir(parents=True)
    (family / "q0" / "plots" / "old" / "load.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    refused = _refusals(family)
    assert len(refused) == 2 and any("notes.txt" in r for r in refused) and any("old/load.png" in r for r in refused)


def test_the_reference_records_a_card_cites_ship_in_its_repo(family: Path) -> None:
    """The reference is `publish = false`: the records of it that q0's card cites ship in q0's repo as
    ledger/ref/<name> (with the repeats they name), so "every record behind this card ships in the repo's
    ledger/" holds; q1's card cites none of them and ships none (issue 27, part 5)."""
    from hfrelease.ledger.store import Ledger, record_name
    from tests.ledger_pairs import write_speed

    ledger = Ledger(family / "results")
    ref = write_speed(ledger, family="tiny", artifact="ref", draft=None, speculative="none",
                      throughputs=(100.0, 104.0, 98.0))
    own = write_speed(ledger, family="tiny", artifact="q0", draft=None, speculative="none",
                      throughputs=(90.0, 91.0, 92.0))
    ref_name, own_name = (record_name(r, r.to_json()) for r in (ref, own))
    card = family / "q0" / "README.md"
    card.write_text(card.read_text() + "\n<!-- provenance:begin -->\n"
                    f"- `speed.chat.q0` = 91.0: output tok/s; `{own_name}`, `{ref_name}`\n<!-- provenance:end -->\n")
    repos = {repo.artifact_id: {f.path for f in repo.files if f.path.startswith("ledger/")}
             for repo in _bundle(family).repos}  # fmt: skip
    ref_raw = ref.extra["raw"]
    assert isinstance(ref_raw, list)
    assert {f"ledger/ref/{ref_name.split('/')[1]}", *(f"ledger/ref/{n}" for n in ref_raw)} <= repos["q0"]
    assert f"ledger/{own_name.split('/')[1]}" in repos["q0"]
    assert not any(path.startswith("ledger/ref/") for path in repos["q1"])
