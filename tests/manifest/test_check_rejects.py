"""`hfrelease check` on a table of broken manifests: each exits 3 and names the field at fault."""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.errors import ExitCode
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

Data = dict[str, Any]


def _artifact(data: Data, ident: str) -> Data:
    return next(a for a in data["artifact"] if a["id"] == ident)


def _set(path: str, value: Any) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[last] = value

    return mutate


def _delete(path: str) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        del node[last]

    return mutate


def _two_references(data: Data) -> None:
    _artifact(data, "fp8")["kind"] = "reference"
    del _artifact(data, "fp8")["quantization"]


def _no_reference(data: Data) -> None:
    _artifact(data, "ref")["kind"] = "quant"
    _artifact(data, "ref")["quantization"] = copy.deepcopy(_artifact(data, "fp8")["quantization"])


def _duplicate_id(data: Data) -> None:
    _artifact(data, "fp8")["id"] = "ref"


def _fidelity_gate(prompts: str) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        data["gate"].append({"id": "fid", "fidelity": prompts, "max_tokens": 8, "max_kl": 0.1})

    return mutate


def _many(data: Data) -> None:
    data["family"]["name"] = "Bad Name"
    data["gate"][0]["max_tokens"] = "16"
    data["workload"][0]["speculative"] = ["none", "eagle"]


# (case id, mutation, location named, fragment of the message)
CASES: list[tuple[str, Callable[[Data], None], str, str]] = [
    ("top-level-typo", _set("artefact", []), "artefact", "did you mean 'artifact'"),
    ("missing-family", _delete("family"), "family", "required key is missing"),
    ("family-name-not-slug", _set("family.name", "My Family"), "family.name", "not a valid id"),
    ("base-model-url", _set("family.base_model", "https://huggingface.co/a/b"), "family.base_model", "is a URL"),
    ("base-model-dotdot", _set("family.base_model", "a/..b"), "family.base_model", "not a valid Hub repo id"),
    ("base-model-no-owner", _set("family.base_model", "justaname"), "family.base_model", "owner/name"),
    ("language-code", _set("family.languages", ["english"]), "family.languages[0]", "ISO 639"),
    ("license-id", _set("family.license", "Apache 2.0"), "family.license", "Hub license id"),
    ("version", _set("family.version", "first"), "family.version", "release version"),
    ("citation-url-http", _set("family.citation.url", "http://example.com/x"), "family.citation.url", "https://"),
    ("no-authors", _set("family.authors", []), "family.authors", "at least 1"),
    ("year-type", _set("family.citation.year", "2026"), "family.citation.year", "expected an integer"),
    ("secret-in-env", _set("serve.env", {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz"}), "serve.env", "secret"),
    ("serve-key-typo", _set("artifact.1.serve.enviroment", {"A": "1"}), "artifact[1].serve.enviroment",
     "did you mean 'env'"),
    ("serve-port-arg", _set("serve.args", ["--port", "9000"]), "serve", "must not contain --port"),
    ("serve-remote-code-arg", _set("serve.args", ["--trust-remote-code"]), "serve", "trust_remote_code = true"),
    ("env-name", _set("serve.env", {"1BAD": "x"}), "serve.env", "environment variable names"),
    ("env-runs-code", _set("serve.env", {"PYTHONPATH": "src"}), "serve.env.PYTHONPATH", "runs code"),
    ("artifact-env-runs-code", _set("artifact.1.serve.env", {"LD_PRELOAD": "x.so"}),
     "artifact[1].serve.env.LD_PRELOAD", "runs code"),
    ("serve-args-load-code", _set("serve.args", ["--tool-parser-plugin", "parsers/evil.py"]), "serve",
     "--tool-parser-plugin"),
    ("fidelity-dev-zero", _fidelity_gate("/dev/zero"), "gate[2].fidelity", "not a regular file"),
    ("artifact-kind", _set("artifact.1.kind", "quantized"), "artifact[1].kind",
     "'reference', 'quant', 'variant' or 'draft'"),
    ("two-references", _two_references, "artifact", "exactly one artifact of kind 'reference', found 2"),
    ("no-reference", _no_reference, "artifact", "found 0"),
    ("duplicate-id", _duplicate_id, "artifact[1].id", "duplicate id 'ref'"),
    ("quant-without-recipe", _delete("artifact.1.quantization"), "artifact[1]", "needs a [artifact.quantization]"),
    ("draft-target-unknown", _set("artifact.2.draft.target", "fp9"), "artifact[2].draft.target",
     "did you mean 'fp8'"),
    ("draft-targets-draft", _set("artifact.2.draft.target", "draft"), "artifact[2].draft.target", "itself a draft"),
    ("draft-min-acceptance", _set("artifact.2.draft.min_acceptance_rate", 1.5),
     "artifact[2].draft.min_acceptance_rate", "less than or equal to 1"),
    ("draft-min-speedup", _set("artifact.2.draft.min_speedup", 0.0), "artifact[2].draft.min_speedup",
     "greater than 0"),
    ("draft-min-identical", _set("artifact.2.draft.min_identical_outputs", 1.5),
     "artifact[2].draft.min_identical_outputs", "less than or equal to 1"),
    ("synthetic-without-length", _set("speculative.1.rejection_sample_method", "synthetic"), "speculative[1]",
     "synthetic_acceptance_length"),
    ("rejection-method", _set("speculative.1.rejection_sample_method", "lossy"),
     "speculative[1].rejection_sample_method", "'standard', 'synthetic' or 'block'"),
    ("source-both", _set("artifact.0.source.hub", "upstream/Fixture-1M"), "artifact[0].source", "exactly one of path"),
    ("hub-source-unpinned", _set("artifact.0.source", {"hub": "upstream/Fixture-1M", "revision": "main"}),
     "artifact[0].source", "40-character commit sha"),
    ("source-dir-missing", _set("artifact.0.source.path", "checkpoints/nope"), "artifact[0].source.path",
     "does not exist"),
    ("repo-not-owners", _set("artifact.1.repo", "someone/Else"), "artifact[1].repo", "not under its owner"),
    ("duplicate-repo", _set("artifact.2.repo", "tester/Fixture-1M-FP8-Dynamic"), "artifact[2].repo",
     "one repo per artifact"),
    ("extra-file-missing", _set("artifact.2.files", ["nope.txt"]), "artifact[2].files[0]", "does not exist"),
    ("gate-budget-type", _set("gate.0.max_tokens", "16"), "gate[0].max_tokens", "expected an integer"),
    ("gate-two-harnesses", _set("gate.0.command", ["python", "x.py"]), "gate[0]", "exactly one of task"),
    ("gate-mode", _set("gate.0.mode", "reasoning"), "gate[0].mode", "'thinking' or 'non-thinking'"),
    ("gate-margin-negative", _set("gate.0.margin", -0.1), "gate[0].margin", "greater than or equal to 0"),
    ("gate-margin-nan", _set("gate.0.margin", float("nan")), "gate[0].margin", "finite number"),
    ("gate-task-dir-missing", _set("gate.0.task_dir", "no_tasks"), "gate[0].task_dir", "does not exist"),
    ("gate-on-draft", _set("gate.0.artifacts", ["draft"]), "gate[0].artifacts[0]", "is a draft"),
    ("gate-unknown-artifact", _set("gate.0.artifacts", ["fp88"]), "gate[0].artifacts[0]", "did you mean 'fp8'"),
    ("ngram-no-lookup", _delete("speculative.0.prompt_lookup_max"), "speculative[0]", "needs prompt_lookup_max"),
    ("spec-draft-not-draft", _set("speculative.1.draft", "fp8"), "speculative[1].draft", "not an artifact of kind"),
    ("spec-method-mismatch", _set("speculative.1.method", "eagle3"), "speculative[1].method", "does not match"),
    ("workload-unknown-spec", _set("workload.0.speculative", ["none", "eagle"]), "workload[0].speculative[1]",
     "no speculative config with id 'eagle'"),
    ("workload-prompts-missing", _set("workload.0.prompts", "prompts/none.jsonl"), "workload[0].prompts",
     "does not exist"),
    ("workload-concurrency", _set("workload.0.concurrency", [0]), "workload[0].concurrency[0]",
     "greater than or equal to 1"),
    ("tag-template", _set("publish.tag", "release-{date}"), "publish", "{version} and {family} only"),
    ("endpoint-http", _set("publish.endpoint", "http://example.com"), "publish.endpoint", "https://"),
    ("schema-version", _set("schema_version", 2), "schema_version", "1"),
]



def _write(family: Path, data: Data) -> Path:
    path = family / "release.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("mutate", "location", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check_rejects(
    fixture_family: Path, cli: CliRun,
    mutate: Callable[[Data], None], location: str, fragment: str,
) -> None:
    """The broken manifest exits with the config code and names the field with a useful message."""
    data = tomllib.loads((fixture_family / "release.toml").read_text())
    mutate(data)
    path = _write(fixture_family, data)

    code, out, err = cli(["check", str(path)])
    assert code == ExitCode.CONFIG
    assert f"  - {location}" in err
    assert fragment in err

    code, out, _ = cli(["check", "--json", str(path)])
    assert code == ExitCode.CONFIG
    report = json.loads(out)
    assert report["ok"] is False
    assert any(p["location"].startswith(location) for p in report["problems"])


def test_case_table_is_large_enough() -> None:
    """The issue asks for at least 25 rejected manifests."""
    assert len(CASES) >= 25


def test_every_problem_reported_at_once(fixture_family: Path, cli: CliRun) -> None:
    """Three unrelated mistakes come back as three problems in one run."""
    data = tomllib.loads((fixture_family / "release.toml").read_text())
    _many(data)
    code, out, _ = cli(["check", "--json", str(_write(fixture_family, data))])
    assert code == ExitCode.CONFIG
    locations = {p["location"] for p in json.loads(out)["problems"]}
    assert {"family.name", "gate[0].max_tokens", "workload[0].speculative[1]"} <= locations


def test_toml_syntax_error_names_the_line(fixture_family: Path, cli: CliRun) -> None:
    """Malformed TOML is reported with its line number."""
    path = fixture_family / "release.toml"
    lines = path.read_text().splitlines()
    lines.insert(4, 'name = "unterminated')
    path.write_text("\n".join(lines))
    code, _, err = cli(["check", str(path)])
    assert code == ExitCode.CONFIG
    assert "not valid TOML" in err
    assert "line 5" in err


def test_not_utf8(fixture_family: Path, cli: CliRun) -> None:
    """A manifest that is not UTF-8 is a config error, not a crash."""
    path = fixture_family / "release.toml"
    path.write_bytes(b"schema_version = 1\n# \xff\xfe\n")
    code, _, err = cli(["check", str(path)])
    assert code == ExitCode.CONFIG
    assert "not UTF-8" in err


def test_missing_manifest(tmp_path: Path, cli: CliRun) -> None:
    """Naming a directory without release.toml says the file cannot be read."""
    code, _, err = cli(["check", str(tmp_path)])
    assert code == ExitCode.CONFIG
    assert "cannot read the manifest" in err


def test_secret_value_never_echoed(fixture_family: Path, cli: CliRun) -> None:
    """A token pasted into the manifest is refused without being printed back."""
    token = "hf_" + "Q" * 34
    data = tomllib.loads((fixture_family / "release.toml").read_text())
    data["serve"]["env"] = {"HF_TOKEN": token}
    data["family"]["owner"] = token  # also misplaced into a field with a format rule
    code, out, err = cli(["check", str(_write(fixture_family, data))])
    assert code == ExitCode.CONFIG
    assert token not in out + err


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("val_metrics.json", '{"loss_epoch": NaN}', "holds NaN"),
    ("val_metrics.json", "{broken", "not JSON"),
    ("train_command.txt", "python train.py --hf-token abcdef123456\n", "passes a credential (--hf-token)"),
])
def test_check_reads_a_drafts_training_files(cli: CliRun, fixture_family: Path, name: str, content: str,
                                            needle: str) -> None:
    """A draft's declared train_command.txt / val_metrics.json its card could not show fails `check` (exit 3)
    at the file's place in the manifest, before any eval, never repeating a secret."""
    (fixture_family / "checkpoints" / "draft" / name).write_text(content)
    code, out, _ = cli(["check", str(fixture_family), "--json", "--offline", "--no-preflight"])
    problems = {p["location"]: p["message"] for p in json.loads(out)["problems"]}
    assert code == ExitCode.CONFIG
    place = next(k for k, v in problems.items() if needle in v)
    assert place.startswith("artifact[") and ".files[" in place and "abcdef123456" not in out
