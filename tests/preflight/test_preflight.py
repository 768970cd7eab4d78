"""The preflight of `hfrelease check`: what would fail on a GPU runner is reported before one starts."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import huggingface_hub.constants  # isolated_hub_client patches its attributes
import pytest
import tomli_w

from hfrelease.ci.install import default_install, install_problem, workflow_install_problems
from hfrelease.errors import ExitCode
from hfrelease.manifest import Manifest, load_manifest
from hfrelease.preflight import run_preflight
from hfrelease.preflight.tasks import TaskCatalog, include_catalog
from hfrelease.preflight.template import takes_thinking_switch
from tests.conftest import CliRun

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SHA = "0123456789abcdef0123456789abcdef01234567"
EMPTY = TaskCatalog(entries={}, version="test")  # no built-in tasks: only each gate's task_dir
# A ChatML template with the thinking switch, as Qwen3-style models have it.
SWITCHED = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n"
            "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}")
NO_SWITCH = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _edit(family: Path, change: Any) -> Path:
    path = family / "release.toml"
    data = tomllib.loads(path.read_text())
    change(data)
    path.write_text(tomli_w.dumps(data))
    return family


def _locations(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["location"]: p for p in report.get("problems", [])}


def _gate(data: dict[str, Any], **values: Any) -> None:
    data["gate"][0].update(values)


def _problems(manifest: Manifest, catalog: TaskCatalog = EMPTY) -> list[str]:
    return [p.render() for p in run_preflight(manifest, cache_dir=None, hub=False, catalog=catalog).problems]


def test_check_reports_a_misspelt_task(fixture_family: Path, cli: CliRun) -> None:
    """A gate's task that lm-eval does not know exits 3 with the name it probably meant."""
    _edit(fixture_family, lambda d: _gate(d, task="fixture_tsak"))
    code, out, _ = cli(["check", "--json", str(fixture_family)])
    assert code == ExitCode.CONFIG
    problem = _locations(json.loads(out))["gate[0].task"]
    assert "'fixture_tsak'" in problem["message"] and problem["suggestion"] == "fixture_task"


def test_check_reports_a_misspelt_metric_and_filter(fixture_family: Path, cli: CliRun) -> None:
    """A metric key the task does not report, by metric or by filter, exits 3 with the key it reports."""
    for metric in ("exact_mtch,none", "exact_match,nnoe", "exact_match"):
        _edit(fixture_family, lambda d, m=metric: _gate(d, metric=m))
        code, out, _ = cli(["check", "--json", str(fixture_family)])
        assert code == ExitCode.CONFIG, metric
        problem = _locations(json.loads(out))["gate[0].metric"]
        assert "it reports: exact_match,none" in problem["message"] and problem["suggestion"] == "exact_match,none"


def test_every_problem_at_once(fixture_family: Path, cli: CliRun) -> None:
    """Task, plugin and workflow problems of one manifest are reported together, not one per run."""
    _edit(fixture_family, lambda d: _gate(d, task="fixture_tsak"))
    shutil.rmtree(fixture_family / "vllm_plugin")
    (fixture_family / "vllm_plugin").mkdir()
    (fixture_family / "vllm_plugin" / "README.md").write_text("the plugin goes here\n")
    code, _, err = cli(["check", "--offline", str(fixture_family)])
    assert code == ExitCode.CONFIG
    assert "2 problems" in err and "gate[0].task" in err and "serve.plugin" in err
    assert "did you mean 'fixture_task'" in err


def _demo_tasks(tmp_path: Path) -> Path:
    target = tmp_path / "tasks"
    shutil.copytree(ROOT / "model_cards" / "demo" / "tasks", target, dirs_exist_ok=True)
    return target


def _family_with_tasks(fixture_family: Path, tmp_path: Path, **gate: Any) -> Manifest:
    tasks = _demo_tasks(tmp_path)
    _edit(fixture_family, lambda d: _gate(d, task_dir=str(tasks), **gate))
    return load_manifest(fixture_family)


def test_demo_tasks_pass(fixture_family: Path, tmp_path: Path) -> None:
    """The demo's own gates (a generate task with filter `answer`, a multiple-choice task on completions) pass."""
    assert _problems(_family_with_tasks(fixture_family, tmp_path, task="demo_arith", metric="exact_match,answer")) == []
    assert _problems(_family_with_tasks(fixture_family, tmp_path, task="demo_mc", metric="acc,none",
                                        api="completions")) == []


def test_loglikelihood_task_on_chat_is_reported(fixture_family: Path, tmp_path: Path) -> None:
    """A multiple-choice (log-likelihood) task with api = "chat" is a problem: chat completions cannot score it."""
    found = _problems(_family_with_tasks(fixture_family, tmp_path, task="demo_mc", metric="acc,none", api="chat"))
    assert len(found) == 1 and found[0].startswith("gate[0].api:") and 'set api = "completions"' in found[0]


def test_filter_of_a_demo_task_is_checked(fixture_family: Path, tmp_path: Path) -> None:
    """The demo task's filter is `answer`: `exact_match,none` is not reported, and the right key is suggested."""
    found = _problems(_family_with_tasks(fixture_family, tmp_path, task="demo_arith", metric="exact_match,none"))
    assert found == [f for f in found if f.startswith("gate[0].metric:")] and "'exact_match,answer'" in found[0]


def test_groups_report_what_they_aggregate_and_tags_nothing(tmp_path: Path) -> None:
    """A group reports only its aggregate_metric_list; a group without one, or a tag, has no score to gate on."""
    (tmp_path / "a.yaml").write_text("task: leaf_a\ntag: both\noutput_type: generate_until\n"
                                     "filter_list:\n  - name: get-answer\n    filter: [{function: take_first}]\n")
    (tmp_path / "b.yaml").write_text("task: leaf_b\ntag: both\n")
    (tmp_path / "g.yaml").write_text("group: scored\ntask: [leaf_a, leaf_b]\naggregate_metric_list:\n"
                                     "  - metric: exact_match\n    filter_list: get-answer\n")
    (tmp_path / "h.yaml").write_text("group: unscored\ntask: [leaf_a]\n")
    from hfrelease.manifest.model import Gate
    from hfrelease.preflight.tasks import gate_problems

    catalog = include_catalog(tmp_path)

    def problems(task: str, metric: str) -> list[str]:
        gate = Gate(id="g", task=task, mode="non-thinking", max_tokens=8, margin=0.1, metric=metric)
        return [p.render() for p in gate_problems(gate, 0, catalog, task_dir="tasks")]

    assert problems("scored", "exact_match,get-answer") == []
    assert "reports no 'exact_match,none'" in problems("scored", "exact_match,none")[0]
    assert "a group without aggregate_metric_list" in problems("unscored", "exact_match,get-answer")[0]
    assert "is an lm-eval tag" in problems("both", "exact_match,none")[0]


def test_custom_command_gates_are_skipped(fixture_family: Path) -> None:
    """The fixture's custom-command gate has no lm-eval task: nothing is looked up for it."""
    manifest = load_manifest(fixture_family)
    assert any(g.command for g in manifest.gate)
    tasks = fixture_family / "tasks"
    assert _problems(manifest, EMPTY.overlay(include_catalog(tasks))) == []


def _thinking_family(fixture_family: Path, template: str, tmp_path: Path) -> Manifest:
    (fixture_family / "checkpoints" / "ref" / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": template, "eos_token": "<|im_end|>"}))
    (fixture_family / "checkpoints" / "fp8" / "chat_template.jinja").write_text(template)
    return _family_with_tasks(fixture_family, tmp_path, task="demo_arith", metric="exact_match,answer",
                              mode="thinking")


def test_thinking_gate_needs_the_switch(fixture_family: Path, tmp_path: Path) -> None:
    """A thinking gate on an artifact whose chat template ignores enable_thinking is reported, per artifact."""
    found = _problems(_thinking_family(fixture_family, NO_SWITCH, tmp_path))
    assert len(found) == 2 and all("ignores enable_thinking" in f for f in found)
    assert {f.split(":")[0] for f in found} == {"artifact[0].source", "artifact[1].source"}


def test_thinking_gate_with_the_switch_passes(fixture_family: Path, tmp_path: Path) -> None:
    """A template that renders differently with the switch on and off (tokenizer_config or .jinja) passes."""
    assert _problems(_thinking_family(fixture_family, SWITCHED, tmp_path)) == []
    assert takes_thinking_switch(SWITCHED) and not takes_thinking_switch(NO_SWITCH)


def _sparse(path: Path, size: int = 2 << 30) -> None:
    """A 2 GB file of zeros that takes no disk space."""
    with path.open("wb") as handle:
        handle.truncate(size)


def test_a_template_file_too_large_to_read_is_reported(fixture_family: Path, tmp_path: Path) -> None:
    """A 2 GB tokenizer_config.json (or chat template) is reported at the artifact's source, not read until memory
    runs out (exit 1, MemoryError)."""
    manifest = _thinking_family(fixture_family, SWITCHED, tmp_path)
    _sparse(fixture_family / "checkpoints" / "ref" / "tokenizer_config.json")
    _sparse(fixture_family / "checkpoints" / "fp8" / "chat_template.jinja")
    found = _problems(manifest)
    assert {f.split(":")[0] for f in found} == {"artifact[0].source", "artifact[1].source"}, found
    assert all("cannot be read" in f and "bytes" in f for f in found), found


def test_a_plugin_pyproject_too_large_to_read_is_reported(fixture_family: Path) -> None:
    """A 2 GB pyproject.toml in the plugin directory is reported, not read."""
    _sparse(fixture_family / "vllm_plugin" / "pyproject.toml")
    found = _problems(load_manifest(fixture_family), EMPTY.overlay(include_catalog(fixture_family / "tasks")))
    assert len(found) == 1 and "pyproject.toml cannot be read" in found[0] and "bytes" in found[0], found


def test_readme_only_plugin_is_reported(fixture_family: Path, cli: CliRun) -> None:
    """A plugin directory holding only a README (a placeholder) exits 3 and says what belongs there."""
    shutil.rmtree(fixture_family / "vllm_plugin")
    (fixture_family / "vllm_plugin").mkdir()
    (fixture_family / "vllm_plugin" / "README.md").write_text("the plugin goes here\n")
    code, out, _ = cli(["check", "--json", str(fixture_family)])
    assert code == ExitCode.CONFIG
    message = _locations(json.loads(out))["serve.plugin"]["message"]
    assert "not an installable package" in message and "README.md" in message


@pytest.mark.parametrize(("pyproject", "expected"), [
    ('[project]\nname = "p"\n', "no [build-system] build-backend"),
    ('[build-system]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "p"\n'
     '[project.entry-points."other.group"]\nx = "p:r"\n', "none in 'vllm.general_plugins'"),
])
def test_plugin_without_backend_or_entry_point(fixture_family: Path, pyproject: str, expected: str) -> None:
    """A pyproject without a build backend, or whose entry points skip vLLM's group, is reported."""
    (fixture_family / "vllm_plugin" / "pyproject.toml").write_text(pyproject)
    found = _problems(load_manifest(fixture_family), EMPTY.overlay(include_catalog(fixture_family / "tasks")))
    assert len(found) == 1 and expected in found[0]


def test_the_repository_passes_its_own_check(repo_root: Path, cli: CliRun, public_hub: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`hfrelease check` with no arguments, at the repository's root, exits 0: both families, the preflight
    included (the flagship's vllm_plugin/ is the real package, not a README placeholder), the Hub not
    reachable (a note, not an error)."""
    monkeypatch.chdir(repo_root)
    code, out, err = cli(["check", "--json"])
    assert code == 0, err
    reports = json.loads(out)
    assert [Path(r["manifest"]).parent.name for r in reports] == ["demo", "nanbeige4.2-3b"], reports
    assert all(r["ok"] for r in reports), [r["problems"] for r in reports]
    flagship = reports[1]
    assert [a["id"] for a in flagship["artifacts"]] == ["bf16", "fp8-dynamic", "nvfp4-fp8-loopshield", "nvfp4a16",
                                                        "eagle3"]
    assert any("HF_HUB_OFFLINE" in note for note in flagship["preflight"]["notes"])  # said, not an error
    code, _, err = cli(["check"])
    assert code == 0, err


# --- where the workflows install hfrelease from ---------------------------------------------------------


@pytest.mark.parametrize(("spec", "ok"), [
    (f"git+https://github.com/acme/hfrelease@{SHA}", True),
    ("https://example.org/hfrelease-0.1.0-py3-none-any.whl", True),
    (".", True),
    ("hfrelease==0.1.0", False),
    ("hfrelease", False),
    ("git+ssh://git@github.com/acme/hfrelease", False),
    ("file:///work/hfrelease", False),
    ("/opt/hfrelease", False),
    ("./missing", False),
])
def test_install_lines(spec: str, ok: bool) -> None:
    """Only lines a fresh runner can install hfrelease from pass (hfrelease is not on PyPI)."""
    assert (install_problem(spec, ROOT) is None) is ok, install_problem(spec, ROOT)


def test_install_from_an_index_of_ones_own(tmp_path: Path) -> None:
    """`hfrelease==X` is fine when the workflow names an index that may serve it."""
    assert install_problem("hfrelease==0.1.0", tmp_path, index=True) is None


def _workflow(root: Path, install: str, extra_env: str = "") -> None:
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text(
        "on: push\njobs:\n  check:\n    runs-on: ubuntu-latest\n    steps:\n      - name: install\n"
        f"        env:\n          HFRELEASE: {json.dumps(install)}\n{extra_env}"
        '        run: python -m pip install "$HFRELEASE"\n      - run: pip install --upgrade hfrelease\n')


def test_check_flags_a_workflow_that_installs_from_pypi(tmp_path: Path) -> None:
    """A workflow installing `hfrelease==0.1.0` (what init wrote) is reported, by its env and by its run line."""
    _workflow(tmp_path, "hfrelease==0.1.0")
    found = workflow_install_problems(tmp_path)
    assert [p.location for p in found] == [".github/workflows/ci.yml jobs.check.steps[0].env.HFRELEASE",
                                           ".github/workflows/ci.yml jobs.check.steps[1].run"]
    assert "not published there" in found[0].message


def test_workflow_with_its_own_index_or_a_pinned_commit_passes(tmp_path: Path) -> None:
    """An index the workflow names, or a pinned git+https line, resolves."""
    _workflow(tmp_path / "a", "hfrelease==0.1.0", "          PIP_INDEX_URL: https://pypi.example.org/simple\n")
    assert [p.location for p in workflow_install_problems(tmp_path / "a")] == [
        ".github/workflows/ci.yml jobs.check.steps[1].run"]
    _workflow(tmp_path / "b", f"git+https://github.com/acme/hfrelease@{SHA}")
    assert len(workflow_install_problems(tmp_path / "b")) == 1  # only the bare `pip install hfrelease`


def test_repository_workflows_install_from_the_checkout() -> None:
    """This repository's release.yml installs `.`, the checkout itself: it resolves."""
    assert workflow_install_problems(ROOT) == []


def test_init_github_without_a_known_origin_asks_for_install(tmp_path: Path, cli: CliRun,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`init --github` never writes `pip install hfrelease==<version>`: with no known origin it asks for --install."""
    monkeypatch.setattr("hfrelease.ci.install.default_install", lambda root: None)
    (tmp_path / ".git").mkdir()
    args = ["init", str(tmp_path / "fam"), "--name", "fam", "--base-model", "a/b", "--owner", "me", "--github"]
    code, _, err = cli(args)
    assert code == ExitCode.USAGE and "--install" in err and "not on PyPI" in err
    assert not (tmp_path / ".github").exists()
    code, _, err = cli([*args, "--install", "hfrelease==0.1.0"])
    assert code == ExitCode.USAGE and "not published there" in err
    install = f"git+https://github.com/acme/hfrelease@{SHA}"
    code, _, err = cli([*args, "--install", install])
    assert code == 0, err
    for name in ("ci.yml", "release.yml"):
        text = (tmp_path / ".github" / "workflows" / name).read_text()
        assert f'HFRELEASE: "{install}"' in text and "hfrelease==" not in text
    assert workflow_install_problems(tmp_path) == []


def test_default_install_is_the_checkouts_pushed_commit(tmp_path: Path) -> None:
    """An install from a checkout with an ssh origin becomes git+https at the checked-out commit."""
    calls: list[list[str]] = []

    def git(argv: list[str], **_: Any) -> Any:
        calls.append(argv)
        out = "git@github.com:acme/hfrelease.git\n" if "remote" in argv else SHA + "\n"
        return type("Done", (), {"returncode": 0, "stdout": out})()

    found = default_install(tmp_path, runner=git)
    if found is not None and calls:  # this hfrelease is installed from a local checkout (editable)
        assert found == f"git+https://github.com/acme/hfrelease.git@{SHA}"
    assert default_install(ROOT, runner=git) == "."  # the repository is hfrelease itself


# --- the Hub: pinned revisions and the release tag (the built-in Hub on this machine) ---------------------


@pytest.fixture
def local_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_hub_client: None) -> Any:
    """The built-in Hub as huggingface_hub's endpoint (HF_ENDPOINT)."""
    from hfrelease.hub import serve

    server = serve(tmp_path / "hub", tokens=[HUB_TOKEN])
    # As HF_ENDPOINT does when huggingface_hub is imported: the endpoint and the download URL template.
    url = server.url.rstrip("/")
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", url)
    monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        url + "/{repo_id}/resolve/{revision}/{filename}")
    yield server
    server.shutdown()


HUB_TOKEN = "hf_preflight_0123456789abcdef"


def _hub_family(fixture_family: Path, hub: Any, *, revision: str | None, tagged: bool | str, template: str,
                weights: bool = True) -> Manifest:
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=hub.url, token=HUB_TOKEN)
    api.create_repo("upstream/Fixture-1M")
    config = json.dumps({"chat_template": template}).encode()
    files = [CommitOperationAdd("tokenizer_config.json", config)]
    if weights:
        files.append(CommitOperationAdd("model.safetensors", (fixture_family / "checkpoints" / "ref" /
                                                               "model.safetensors").read_bytes()))
    commit = api.create_commit("upstream/Fixture-1M", operations=files, commit_message="tokenizer").oid
    api.create_repo("tester/Fixture-1M-FP8-Dynamic")
    if tagged:
        api.create_tag("tester/Fixture-1M-FP8-Dynamic", tag="v1.0")
    if tagged == "every repo":
        api.create_repo("tester/Fixture-1M-Draft")
        api.create_tag("tester/Fixture-1M-Draft", tag="v1.0")

    def pin(data: dict[str, Any]) -> None:
        data["artifact"][0]["source"] = {"hub": "upstream/Fixture-1M", "revision": revision or commit}
        data["gate"][0].update(mode="thinking", task="demo_arith", metric="exact_match,answer", artifacts=["ref"],
                               task_dir=str(ROOT / "model_cards" / "demo" / "tasks"))

    return load_manifest(_edit(fixture_family, pin))


def _hub_report(manifest: Manifest) -> Any:
    from huggingface_hub import HfApi

    # Offline mode on, as in CI: the built-in Hub on this machine is still asked.
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        return run_preflight(manifest, cache_dir=None, catalog=EMPTY,
                             api_factory=lambda endpoint: HfApi(endpoint=endpoint, token=HUB_TOKEN))
    finally:
        huggingface_hub.constants.HF_HUB_OFFLINE = False


def test_hub_revision_that_does_not_exist_and_a_taken_tag(fixture_family: Path, local_hub: Any) -> None:
    """A pinned commit the Hub repo lacks, and a release tag already on every published repo, are both reported."""
    report = _hub_report(_hub_family(fixture_family, local_hub, revision="f" * 40, tagged="every repo",
                                     template=SWITCHED))
    found = {p.location: p.message for p in report.problems}
    assert "has no commit ffffffff" in found["artifact[0].source.revision"]
    assert "'v1.0' is already on every published repo" in found["family.version"]
    assert "tester/Fixture-1M-FP8-Dynamic" in found["family.version"] and "tester/Fixture-1M-Draft" in found[
        "family.version"]


def test_a_tag_on_some_repos_is_a_stopped_publish_the_release_completes(fixture_family: Path, local_hub: Any) -> None:
    """The tag on one of two published repos (a publish that stopped after its first repo) is no problem: a re-run
    of the whole workflow must get past its check job to complete it. It is said as a note."""
    report = _hub_report(_hub_family(fixture_family, local_hub, revision=None, tagged=True, template=SWITCHED))
    assert report.problems == ()
    assert any("already on 1 of 2 published repos" in n and "completes" in n for n in report.notes), report.notes


def test_hub_source_at_its_commit_passes_and_its_template_is_read(fixture_family: Path, local_hub: Any) -> None:
    """A revision the repo holds, a tag not taken yet and a template with the switch (fetched from the Hub) pass."""
    assert _hub_report(_hub_family(fixture_family, local_hub, revision=None, tagged=False,
                                   template=SWITCHED)).problems == ()


def test_hub_source_without_weights(fixture_family: Path, local_hub: Any) -> None:
    """A Hub source pinned to a commit holding no *.safetensors (a README-only vendor repo) is reported at its
    revision, from the Hub's listing (issue 27)."""
    report = _hub_report(_hub_family(fixture_family, local_hub, revision=None, tagged=False, template=SWITCHED,
                                     weights=False))
    assert [p.location for p in report.problems] == ["artifact[0].source.revision"]
    assert "holds no .safetensors files (it holds: .gitattributes, tokenizer_config.json)" in report.problems[0].message


def test_hub_template_without_switch(fixture_family: Path, local_hub: Any) -> None:
    """The Hub source's chat template (one small file at the pinned commit) is checked like a local one."""
    report = _hub_report(_hub_family(fixture_family, local_hub, revision=None, tagged=False, template=NO_SWITCH))
    assert [p.location for p in report.problems] == ["artifact[0].source"]
    assert "ignores enable_thinking" in report.problems[0].message


def test_unreachable_hub_is_said_plainly(fixture_family: Path, public_hub: None) -> None:
    """With the Hub out of reach (HF_HUB_OFFLINE, huggingface.co) nothing is a problem; a note says what was skipped."""
    report = run_preflight(load_manifest(fixture_family), cache_dir=None,
                           catalog=EMPTY.overlay(include_catalog(fixture_family / "tasks")))
    assert report.problems == ()
    assert any("release tag 'v1.0' not looked up" in note and "HF_HUB_OFFLINE" in note for note in report.notes)


def test_without_lm_eval_tasks_are_a_note(fixture_family: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where lm-eval is not installed, the task checks are skipped with a note, never a crash."""
    def missing(cache_dir: Path | None) -> TaskCatalog:
        raise ModuleNotFoundError("lm_eval")

    monkeypatch.setattr("hfrelease.preflight.tasks.builtin_catalog", missing)
    report = run_preflight(load_manifest(fixture_family), cache_dir=None, hub=False)
    assert report.problems == () and any("lm-eval is not installed" in n for n in report.notes)
