"""A private (or gated) Hub source read with the eval jobs' read-only token, `HF_READ_TOKEN`, on the built-in
Hub: eval's plan downloads and hashes it with that token and no other; the token reaches no server or gate
process. (That it cannot push: tests/hub/test_hub_read_tokens.py; that publish never uses it:
tests/publish/test_publish_read_token.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hfrelease.errors import ArtifactError, ExitCode
from hfrelease.hub import HubServer, serve
from tests.hub_fixtures import TOKEN

READ = "hf_readonly_0123456789abcdef"
SOURCE = "upstream/Fixture-1M"


@pytest.fixture
def hub(hub_root: Path) -> Iterator[HubServer]:
    """The built-in Hub with a read-only token scoped to the family's source repo."""
    server = serve(hub_root, tokens=[TOKEN], read_tokens={READ: [SOURCE]})
    yield server
    server.shutdown()


def test_eval_reads_a_private_source_with_the_read_token(
    hub_family: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference's repo made private: without a token eval's plan cannot read it (exit 3, naming it); with
    HF_READ_TOKEN it downloads and hashes it, as from a public repo (HF_TOKEN stays empty)."""
    from huggingface_hub import HfApi

    from hfrelease.evaluation.plan import plan_eval
    from hfrelease.files.sources import hub_access, hub_content_hash
    from hfrelease.ledger.store import Ledger
    from hfrelease.manifest import load_manifest

    family, revision = hub_family
    with hub_access():
        HfApi(token=TOKEN).update_repo_settings(SOURCE, private=True)
    manifest = load_manifest(family)
    monkeypatch.delenv("HF_READ_TOKEN", raising=False)
    with pytest.raises(ArtifactError) as unread:
        plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref"])
    assert unread.value.exit_code == ExitCode.CONFIG and SOURCE in unread.value.message
    monkeypatch.setenv("HF_READ_TOKEN", READ)
    plan = plan_eval(manifest, ledger=Ledger(family / "results"), hash_cache=None, artifacts=["ref"])
    (job,) = plan.servers
    assert job.model_dir is not None and job.model_dir.name == revision
    assert job.content is not None and job.content.sha256 == hub_content_hash(SOURCE, revision).sha256


def test_the_read_token_reaches_no_server_or_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM, lm-eval and custom gates start from `public_environment`: HF_READ_TOKEN is not in it."""
    from hfrelease.redact import public_environment

    monkeypatch.setenv("HF_READ_TOKEN", READ)
    env = public_environment()
    assert "HF_READ_TOKEN" not in env and READ not in "".join(env.values())
