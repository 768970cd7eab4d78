"""`release --hub local --trusted` rehearses trusted publishing (issue 28, part 2): no `secrets.HF_TOKEN`; a
job granted `id-token: write` mints an id token from the built-in Hub and exchanges it for one token per
repo (huggingface_hub's own `oidc_login`); a job without that permission has no id-token variables."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hfrelease.ci.rehearsal import rehearse
from hfrelease.errors import UsageError
from hfrelease.publish import LOCAL
from tests.ci.planted import write_workflow

SETUP_PYTHON = "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97"
PUBLISH = """\
import os
from huggingface_hub import HfApi
from hfrelease.publish import trusted
assert trusted.available(), "no id token to publish with"
endpoint = os.environ["HF_ENDPOINT"]
tokens = trusted.exchange_per_repo(["tester/Fixture-1M-FP8-Dynamic"], endpoint=endpoint)
api = HfApi(endpoint=endpoint, token=tokens["tester/Fixture-1M-FP8-Dynamic"].value)
api.upload_file(path_or_fileobj=b"published by trusted publishing", path_in_repo="probe.txt",
                repo_id="tester/Fixture-1M-FP8-Dynamic")
try:
    api.upload_file(path_or_fileobj=b"x", path_in_repo="probe.txt", repo_id="tester/Fixture-1M-Draft")
except Exception as error:
    assert "403" in str(error), error
else:
    raise SystemExit("a token scoped to one repo wrote another")
"""


def _workflow(root: Path) -> None:
    write_workflow(root, """\
        check:
          runs-on: ubuntu-latest
          steps:
            - env:
                GIVEN: ${{ secrets.HF_TOKEN }}
              run: test -z "$GIVEN" && test -z "${ACTIONS_ID_TOKEN_REQUEST_URL:-}"
        publish:
          needs: check
          runs-on: ubuntu-latest
          environment: release
          permissions: {id-token: write}
          steps:
            - uses: SETUP_PYTHON
              with: {python-version: "3.11"}
            - shell: python
              env:
                HF_TOKEN: ${{ secrets.HF_TOKEN }}
              run: |
        """.replace("SETUP_PYTHON", SETUP_PYTHON).rstrip(" ") + textwrap.indent(PUBLISH, " " * 16))


def test_trusted_rehearsal_publishes_with_a_repo_scoped_token_from_the_oidc_exchange(fixture_family: Path,
                                                                                        tmp_path: Path) -> None:
    """The publish job (id-token: write, environment release) gets a token for its repo and only that repo;
    the check job has neither a token nor the id-token variables. Before, the rehearsal always handed the
    Hub's own token to secrets.HF_TOKEN and no job could mint an id token."""
    from huggingface_hub import HfApi

    _workflow(tmp_path)
    report = rehearse(fixture_family, work_dir=tmp_path / "work", hub=LOCAL, tag="v0.9",
                      env={"PATH": "/usr/bin:/bin"}, trusted=True)
    assert [(j.id, j.status, j.detail) for j in report.jobs] == [("check", "success", ""), ("publish", "success", "")]
    token = (tmp_path / "work" / "hub" / "token").read_text().strip()
    from hfrelease.files.sources import hub_access
    from hfrelease.hub import serve

    server = serve(tmp_path / "work" / "hub")
    try:
        with hub_access(server.url):
            files = HfApi(endpoint=server.url, token=token).list_repo_files("tester/Fixture-1M-FP8-Dynamic")
            draft = HfApi(endpoint=server.url, token=token).list_repo_files("tester/Fixture-1M-Draft")
        assert "probe.txt" in files and "probe.txt" not in draft
    finally:
        server.shutdown()


def test_trusted_needs_the_built_in_hub(fixture_family: Path, tmp_path: Path) -> None:
    """--trusted against another Hub is a usage error (exit 2): only the built-in Hub has the exchange."""
    _workflow(tmp_path)
    with pytest.raises(UsageError, match="needs --hub local"):
        rehearse(fixture_family, work_dir=tmp_path / "work", hub="http://127.0.0.1:9", tag="v0.9", env={},
                 trusted=True)
