"""Where a release goes: a Hub endpoint URL, or `local`, the built-in Hub started in this process."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hfrelease.errors import ConfigError, ConfigProblem
from hfrelease.hub import HubServer, serve
from hfrelease.hub.oidc import OidcSettings
from hfrelease.manifest.fields import endpoint_problem
from hfrelease.publish.tokens import Token

LOCAL = "local"


@dataclass(frozen=True, kw_only=True)
class HubTarget:
    endpoint: str
    token: Token | None  # the local Hub's own token; None for a remote Hub (resolved separately)
    server: HubServer | None


def disable_xet() -> None:
    """Uploads go through LFS, never Xet: the built-in Hub cannot emulate Xet, and one path is tested.

    huggingface_hub reads `HF_HUB_DISABLE_XET` once at import, so the constant is set as well.
    """
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_DISABLE_XET = True


@contextlib.contextmanager
def open_hub(
    hub: str, *, family_root: Path, hub_root: Path | None = None, announce: Callable[[str], None] | None = None,
    oidc: OidcSettings | None = None,
) -> Iterator[HubTarget]:
    """Yield the target for `hub`; for `local`, a built-in Hub on `hub_root` (default .hfrelease/hub) until exit."""
    from hfrelease.files.sources import hub_access

    disable_xet()
    if hub != LOCAL:
        problem = endpoint_problem(hub)
        if problem:
            raise ConfigError("--hub", [ConfigProblem(location="--hub", message=problem)])
        # HF_HUB_OFFLINE keeps huggingface_hub off the internet, not off this machine: a Hub on a loopback
        # address (another built-in Hub, an emulator) is reached as `local` is, as check and render reach it.
        with hub_access(hub):
            yield HubTarget(endpoint=hub.rstrip("/"), token=None, server=None)
        return
    root = hub_root or family_root / ".hfrelease" / "hub"
    server = serve(root, oidc=oidc)  # `oidc`: its trusted publishers and id-token issuer (the rehearsal's)
    # HF_HUB_OFFLINE keeps huggingface_hub off the internet; the built-in Hub is on this machine and is
    # part of hfrelease, so the client may talk to it even when offline mode is on (the demo and CI run
    # with it on). The flag is read at request time, so lifting it for the block is enough.
    try:
        if server.token_file is None:  # serve() without tokens always keeps its own in the root
            raise RuntimeError("the local Hub started without a token file")
        if announce:
            # The token's file, never the token.
            announce(f"built-in Hub on {server.url} (root {root}; token in {server.token_file})")
        token = Token(server.token_file.read_text().strip(), f"the local Hub's token file {server.token_file}")
        with hub_access(server.url):
            yield HubTarget(endpoint=server.url, token=token, server=server)
    finally:
        server.shutdown()
