"""The built-in Hub server: a Hugging Face Hub compatible HTTP server, standard library only.

It is both the test fixture of hfrelease and the embedded "staging hub" a release can publish to. It
implements what huggingface_hub 2.x and the `hf` CLI call — whoami, repo create/info/delete, preupload,
NDJSON commit (with `parentCommit` checked: 412 when stale), LFS batch + basic transfer + verify, tree,
paths-info, refs, commits, tags, branches, discussions and pull requests, collections, and resolve
(GET/HEAD, ranges) — with the status codes, `X-Error-Code` / `X-Error-Message` / `X-Request-Id` headers and
JSON error bodies of the real Hub, so clients raise huggingface_hub's own exception types.

State lives in files under the root directory and survives restarts; see `storage.py` for the layout and
why a commit lands fully or not at all. Xet storage cannot be emulated: clients must run with
`HF_HUB_DISABLE_XET=1`.

Use in-process (tests):

    server = serve(tmp_path / "hub", tokens=["hf_test"])
    api = HfApi(endpoint=server.url, token="hf_test")
    ...
    server.shutdown()

or from the command line, via `hfrelease hub serve` (which builds a `ServeSettings` and calls `run`), or
`python -m hfrelease.hub --root DIR`.

Test-only facilities: `HubServer.stats()` / `GET /api/_hfrelease/stats` count requests per endpoint and
file bytes received (`stats.py`); `serve(..., fault_injection=True)` lets tests make the server answer
429 / 5xx or drop connections on cue (`faults.py`).
"""

from hfrelease.hub.errors import HubStartError
from hfrelease.hub.faults import FaultInjector, FaultRule
from hfrelease.hub.routes import ENDPOINTS
from hfrelease.hub.server import HubServer, ServeSettings, run, serve

__all__ = ["ENDPOINTS", "FaultInjector", "FaultRule", "HubServer", "HubStartError", "ServeSettings", "run", "serve"]
