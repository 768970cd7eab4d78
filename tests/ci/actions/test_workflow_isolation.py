"""The isolation rule over the rendered workflows: no credential or id-token beside untrusted code."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from hfrelease.ci.actions.isolation import check_workflow_text, isolation_problems
from hfrelease.ci.workflows import WorkflowSpec, render_workflows
from hfrelease.manifest import load_manifest
from tests.ci.flagship import ROOT, SPEC

FAMILY_SPEC = WorkflowSpec(manifest="model_cards/mymodel/release.toml", runner_label="h100", environment="hub",
                           install="git+https://github.com/acme/hfrelease@0123456789abcdef0123456789abcdef01234567")


def _release(spec: WorkflowSpec, family: str) -> dict[str, Any]:
    manifest = load_manifest(ROOT / family, check_files=False)
    data = yaml.safe_load(render_workflows(manifest, spec)["workflows/release.yml"])
    assert isinstance(data, dict)
    return data


def _flagship() -> dict[str, Any]:
    return _release(SPEC, SPEC.manifest)


def _family() -> dict[str, Any]:
    return _release(FAMILY_SPEC, "tests/fixtures/family")


def test_committed_workflows_keep_the_rule() -> None:
    """.github/workflows/*.yml (as committed) have no isolation problem."""
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        assert check_workflow_text(path.read_text(encoding="utf-8")) == [], path.name


@pytest.mark.parametrize("render", [_flagship, _family], ids=["flagship", "init-github"])
def test_rendered_release_workflows_keep_the_rule(render: Callable[[], dict[str, Any]]) -> None:
    """The release workflow as rendered for the flagship and for a new family breaks no isolation rule."""
    data = render()
    assert isolation_problems(data) == []
    # And the rule has something to hold on to: one credentialed job, jobs that run untrusted code.
    assert [job for job in data["jobs"] if "environment" in data["jobs"][job]] == ["publish"]
    assert data["jobs"]["publish"]["runs-on"] == "ubuntu-latest"


def _step(data: dict[str, Any], job: str, needle: str) -> dict[str, Any]:
    return next(s for s in data["jobs"][job]["steps"] if needle in s.get("run", ""))


def _token_in_eval(data: dict[str, Any]) -> None:
    _step(data, "eval", "hfrelease eval")["env"]["HF_TOKEN"] = "${{ secrets.HF_TOKEN }}"


def _id_token_in_bundle(data: dict[str, Any]) -> None:
    data["jobs"]["bundle"]["permissions"]["id-token"] = "write"


def _vllm_in_publish(data: dict[str, Any]) -> None:
    _step(data, "publish", "pip install")["run"] += '"$RUNNER_TEMP/venv/bin/python" -m pip install vllm\n'


def _unlocked_install_in_publish(data: dict[str, Any]) -> None:
    step = _step(data, "publish", "pip install")
    step["run"] = step["run"].replace("--require-hashes --no-deps -r \"$HFRELEASE_LOCK\"", "-r \"$HFRELEASE_LOCK\"")


def _publish_builds_the_plugin(data: dict[str, Any]) -> None:
    step = _step(data, "publish", "--only publish")
    step["run"] = step["run"].replace(" --from-bundle release-bundle", "")


def _eval_in_publish(data: dict[str, Any]) -> None:
    data["jobs"]["publish"]["steps"].append({"run": 'hfrelease eval "$MANIFEST"'})


def _write_all_in_merge(data: dict[str, Any]) -> None:
    data["jobs"]["merge"]["permissions"] = "write-all"


def _unpinned_hfrelease_in_publish(data: dict[str, Any]) -> None:
    data["env"]["HFRELEASE"] = "git+https://github.com/acme/hfrelease@main"


def _read_token_in_publish(data: dict[str, Any]) -> None:
    _step(data, "publish", "--only publish")["env"]["HF_READ_TOKEN"] = "${{ secrets.HF_READ_TOKEN }}"


def _secret_in_workflow_env(data: dict[str, Any]) -> None:
    data["env"]["HF_READ_TOKEN"] = "${{ secrets.HF_READ_TOKEN }}"


def _fork_pull_requests_on_the_gpu_pool(data: dict[Any, Any]) -> None:
    data["on"] = {**data.pop(True), "pull_request_target": {}}  # PyYAML reads the key `on` as True


@pytest.mark.parametrize("plant", [_token_in_eval, _id_token_in_bundle, _vllm_in_publish, _unlocked_install_in_publish,
                                   _publish_builds_the_plugin, _eval_in_publish, _write_all_in_merge,
                                   _unpinned_hfrelease_in_publish, _read_token_in_publish, _secret_in_workflow_env,
                                   _fork_pull_requests_on_the_gpu_pool])
@pytest.mark.parametrize("render", [_flagship, _family], ids=["flagship", "init-github"])
def test_a_planted_violation_is_found(render: Callable[[], dict[str, Any]],
                                      plant: Callable[[dict[str, Any]], None]) -> None:
    """Each planted violation (a credential beside untrusted code, or id-token outside publish) is reported."""
    data = copy.deepcopy(render())
    plant(data)
    problems = isolation_problems(data)
    assert problems, plant.__name__
    text = "\n".join(p.render() for p in problems)
    assert "job " in text


def test_the_read_token_is_allowed_beside_eval_and_nothing_else_is() -> None:
    """The eval step's HF_READ_TOKEN is no problem; HF_TOKEN there is, named with the secret it reads; a fork
    pull request on the self-hosted jobs is refused unless the job's `if:` keeps forks out."""
    data = _flagship()
    assert "HF_READ_TOKEN" in repr(_step(data, "eval", "hfrelease eval")["env"]) and isolation_problems(data) == []
    _token_in_eval(data)
    assert next(p.render() for p in isolation_problems(data)).startswith("job eval: reads a secret (HF_TOKEN)")
    data = _flagship()
    data.pop(True)  # PyYAML reads the key `on` as True
    data["on"] = {"pull_request": {}}
    assert {p.job for p in isolation_problems(data)} == {"eval", "merge", "bundle"}
    for job in ("eval", "merge", "bundle"):
        data["jobs"][job]["if"] = "github.event.pull_request.head.repo.fork == false"
    assert isolation_problems(data) == []
