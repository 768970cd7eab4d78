"""The workflows as data: hardening rules, the release job graph, and no drift from the template."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from hfrelease.ci.workflows import ACTIONS, WorkflowSpec, render_workflows
from hfrelease.manifest import load_manifest
from hfrelease.publish.decision import JOBS
from tests.ci.flagship import FILES, ROOT, SPEC, render

WORKFLOWS = ROOT / ".github" / "workflows"
FAMILY_SPEC = WorkflowSpec(manifest="model_cards/mymodel/release.toml", runner_label="a100-80g",
                           environment="hub-release",
                           install="git+https://github.com/acme/hfrelease@0123456789abcdef0123456789abcdef01234567")


def _family_texts() -> dict[str, str]:
    manifest = load_manifest(ROOT / "tests" / "fixtures" / "family", check_files=False)
    return render_workflows(manifest, FAMILY_SPEC)


def _all_workflows() -> dict[str, str]:
    """Every workflow these rules cover: the repository's own, and what `init --github` writes for a family."""
    texts = {f"repo:{p.name}": p.read_text(encoding="utf-8") for p in sorted(WORKFLOWS.glob("*.yml"))}
    texts.update({f"family:{name}": text for name, text in _family_texts().items() if name.startswith("workflows/")})
    return texts


def _load(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    # PyYAML reads the key `on` as the boolean True (YAML 1.1); GitHub reads it as "on".
    if True in data:
        data["on"] = data.pop(True)
    assert isinstance(data, dict)
    return data


def _steps(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(job_id, step) for job_id, job in data["jobs"].items() for step in job.get("steps", [])]


RELEASES = {"repo:release.yml": (WORKFLOWS / "release.yml").read_text(encoding="utf-8"),
            "family:workflows/release.yml": _family_texts()["workflows/release.yml"]}


def test_flagship_release_workflow_is_the_template_rendered() -> None:
    """The committed release.yml and actionlint.yaml equal a fresh render (re-render: tests/ci/flagship.py)."""
    for name, text in render().items():
        committed = (ROOT / ".github" / name).read_text(encoding="utf-8")
        rerender = ".venv/bin/python tests/ci/flagship.py"
        assert committed == text, f".github/{name} drifted from its template: run {rerender}"
    assert set(FILES) <= set(render_workflows(load_manifest(ROOT / SPEC.manifest, check_files=False), SPEC))


@pytest.mark.parametrize("name", sorted(_all_workflows()))
def test_permissions_are_empty_by_default_and_least_per_job(name: str) -> None:
    """Top-level permissions are {}; every job asks for contents: read; only publish writes (id-token, attestations)."""
    data = _load(_all_workflows()[name])
    assert data["permissions"] == {}
    for job_id, job in data["jobs"].items():
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"{job_id}: no job-level permissions"
        for scope, level in permissions.items():
            if scope in ("id-token", "attestations", "artifact-metadata"):
                assert job_id == "publish" and level == "write", f"{job_id}: {scope} outside the publish job"
            else:
                assert level == "read", f"{job_id}: {scope}: {level}"


@pytest.mark.parametrize("name", sorted(_all_workflows()))
def test_actions_pinned_to_full_commits(name: str) -> None:
    """Every `uses:` names a 40-hex commit of a known release, with the version as a trailing comment."""
    text = _all_workflows()[name]
    pins = {f"actions/{key.replace('_', '-')}": pin for key, pin in ACTIONS.items()}
    uses = re.findall(r"uses:\s*(\S+)(.*)", text)
    assert uses
    for ref, rest in uses:
        action, _, sha = ref.partition("@")
        assert re.fullmatch(r"[0-9a-f]{40}", sha), f"{ref}: not pinned to a full commit"
        assert action in pins and pins[action].sha == sha, f"{ref}: not the reviewed pin"
        assert rest.strip() == f"# {pins[action].version}", f"{ref}: the version comment is {rest.strip()!r}"


@pytest.mark.parametrize("name", sorted(_all_workflows()))
def test_no_expressions_in_run_no_caches_no_persisted_credentials(name: str) -> None:
    """`run:` takes values through env only; nothing is cached; checkout keeps no credentials."""
    data = _load(_all_workflows()[name])
    assert "pull_request_target" not in data["on"] and "workflow_run" not in data["on"]
    for job_id, step in _steps(data):
        if "run" in step:
            assert "${{" not in step["run"], f"{job_id}: an expression inside run: {step['run']!r}"
        uses = step.get("uses", "")
        assert "cache" not in uses, f"{job_id}: {uses}"
        assert not any(key.startswith("cache") for key in step.get("with", {})), f"{job_id}: a cache in {uses}"
        if uses.startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, f"{job_id}: checkout persists credentials"


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_release_job_graph(name: str) -> None:
    """check -> eval matrix (self-hosted) -> merge -> render -> bundle -> publish (hosted, from the bundle)."""
    data = _load(RELEASES[name])
    label = "gpu" if name.startswith("repo:") else FAMILY_SPEC.runner_label
    environment = "release" if name.startswith("repo:") else FAMILY_SPEC.environment
    jobs = data["jobs"]
    assert tuple(jobs) == JOBS
    assert data["on"] == {"push": {"tags": ["v*"]}}
    assert data["concurrency"]["cancel-in-progress"] is False
    # The tag check runs in the first job, which every other job needs (directly or through the chain).
    check_runs = [s["run"] for s in jobs["check"]["steps"] if "run" in s]
    assert any("--tag" in run and "--only check" in run for run in check_runs)
    assert jobs["check"]["runs-on"] == "ubuntu-latest"
    assert jobs["eval"]["needs"] == "check"
    assert jobs["eval"]["strategy"]["matrix"] == "${{ fromJSON(needs.check.outputs.matrix) }}"
    assert jobs["eval"]["strategy"]["fail-fast"] is False
    assert jobs["eval"]["runs-on"] == ["self-hosted", label]
    assert [jobs[j]["needs"] for j in ("merge", "render", "bundle", "publish")] == ["eval", "merge", "render", "bundle"]
    # publish runs on a fresh GitHub-hosted runner, from the bundle job's artifact, never beside the GPU jobs.
    assert jobs["publish"]["runs-on"] == "ubuntu-latest"
    assert jobs["bundle"]["runs-on"] == ["self-hosted", label]
    # The cards say what changed since the release before this one, which the workflow cannot name: the render
    # and the lint both read it as `previous` (the same comparison, or the lint finds numbers it cannot derive).
    render_runs = [s["run"] for s in jobs["render"]["steps"] if "run" in s]
    assert 'hfrelease render "$MANIFEST" --since previous' in render_runs
    assert 'hfrelease check --cards "$MANIFEST" --since previous' in render_runs
    publish_runs = " ".join(s.get("run", "") for s in jobs["publish"]["steps"])
    assert "--from-bundle release-bundle" in publish_runs and "--require-hashes" in publish_runs
    # Only the publish job meets the protected environment or a write secret; the jobs that read the sources
    # (check, eval, merge's gate step) get the read-only HF_READ_TOKEN, on those steps only, and publish never.
    for job_id, job in jobs.items():
        assert ("environment" in job) == (job_id == "publish"), job_id
        named = set(re.findall(r"secrets\.(\w+)", yaml.safe_dump(job)))
        assert named == ({"HF_TOKEN"} if job_id == "publish" else
                         {"HF_READ_TOKEN"} if job_id in ("check", "eval", "merge") else set()), job_id
        reading = [s for s in job["steps"] if "HF_READ_TOKEN" in (s.get("env") or {})]
        assert [s["env"]["HF_READ_TOKEN"] for s in reading] == ["${{ secrets.HF_READ_TOKEN }}"] * (job_id != "publish"
                                                                                                   and bool(named))
    assert jobs["publish"]["environment"]["name"] == environment
    uploads = [s for s in jobs["eval"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads[0]["with"]["name"] == "ledger-${{ matrix.artifact }}"
    merge_runs = " ".join(s.get("run", "") for s in jobs["merge"]["steps"])
    assert "hfrelease ledger merge" in merge_runs and "--only gate" in merge_runs


def test_family_files_name_the_chosen_runner_label_and_environment() -> None:
    """`init --github`'s runner label reaches runs-on and actionlint.yaml; its environment the publish job."""
    texts = _family_texts()
    assert "runs-on: [self-hosted, a100-80g]" in texts["workflows/release.yml"]
    assert "name: hub-release" in texts["workflows/release.yml"]
    assert yaml.safe_load(texts["actionlint.yaml"]) == {"self-hosted-runner": {"labels": ["a100-80g"]}}
    assert 'MANIFEST: "model_cards/mymodel/release.toml"' in texts["workflows/release.yml"]


@pytest.mark.parametrize("bad", [{"runner_label": "gpu, evil"}, {"environment": "a b"}, {"manifest": "../x.toml"}])
def test_workflow_spec_rejects_values_that_would_break_the_yaml(bad: dict[str, str]) -> None:
    """A runner label, environment or manifest path that is not a plain name is a config error, not YAML."""
    from hfrelease.errors import ConfigError

    manifest = load_manifest(ROOT / "tests" / "fixtures" / "family", check_files=False)
    spec = WorkflowSpec(**{"manifest": "release.toml", **bad})
    with pytest.raises(ConfigError):
        render_workflows(manifest, spec)


def test_readme_documents_the_release_workflow() -> None:
    """README has the section on releasing from GitHub Actions, naming the policy for failed gates."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Releasing from GitHub Actions", 1)[1].split("\n## ", 1)[0]
    assert "publish = false" in section and "hfrelease release" in section

