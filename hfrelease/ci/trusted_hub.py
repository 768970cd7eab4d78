"""`release --hub local --trusted`: the publish job gets no `secrets.HF_TOKEN` and publishes as on GitHub with
trusted publishing, through the built-in Hub's OIDC exchange (`hfrelease.hub.oidc`).

The Hub plays both of GitHub's parts: its id-token endpoint stands for `ACTIONS_ID_TOKEN_REQUEST_URL`, which
the runner hands only to a job granted `id-token: write` (`permissions:`), with the claims of this run
(repository `local/rehearsal`, the workflow file, the tag, the job's deployment environment); its exchange
trusts that workflow on each repo the family publishes. A repo trusts a publisher only once it exists (the
maintainer creates it and adds the publisher on the Hub), so the rehearsal creates the missing ones, empty,
with the Hub's own token before any job runs; what a job does after that it does with a repo-scoped token.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hfrelease.ci.actions.workflow import Workflow
from hfrelease.hub.oidc import OidcSettings, trusted_publishers
from hfrelease.manifest import Manifest

REPOSITORY = "local/rehearsal"  # the runner's github.repository


def _environment(workflow: Workflow) -> str | None:
    """The deployment environment of the jobs granted `id-token: write` (a literal name), None without one."""
    from hfrelease.ci.actions.runner import may_mint_id_token

    names = set()
    for job in workflow.jobs.values():
        if may_mint_id_token(job.permissions):
            environment = job.environment.get("name") if isinstance(job.environment, Mapping) else job.environment
            if isinstance(environment, str) and "${{" not in environment:
                names.add(environment)
    return names.pop() if len(names) == 1 else None


def oidc_settings(workflow: Workflow, manifest: Manifest, *, tag: str) -> OidcSettings:
    """Each repo the family publishes trusts this workflow (and its id-token job's environment)."""
    environment = _environment(workflow)
    name = Path(workflow.path).name
    ref = f"{REPOSITORY}/.github/workflows/{name}@refs/tags/{tag}"
    claims = {"repository": REPOSITORY, "job_workflow_ref": ref, "workflow_ref": ref, "ref": f"refs/tags/{tag}",
              **({"environment": environment} if environment else {})}
    repos = [str(a.repo) for a in manifest.artifact if a.publish]
    return OidcSettings(publishers=trusted_publishers(repos, repository=REPOSITORY, workflow=name,
                                                      environment=environment), claims=claims)


def create_repos(manifest: Manifest, *, endpoint: str, token: str) -> None:
    """The family's published repos, created empty where missing (a trusted publisher is set on a repo)."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    for artifact in manifest.artifact:
        if artifact.publish:
            api.create_repo(str(artifact.repo), exist_ok=True)


def id_token_env(endpoint: str, settings: OidcSettings) -> dict[str, str]:
    """What the runner sets in a job granted `id-token: write`."""
    return {"ACTIONS_ID_TOKEN_REQUEST_URL": f"{endpoint}/api/_hfrelease/oidc/github",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": settings.request_token}
