"""A random token sent through every path of `hfrelease publish` never shows up anywhere it could leak.

Paths: success, 401 (the Hub refuses the token), 500 (a failing commit), a crash with HFRELEASE_DEBUG's
traceback, -vv (huggingface_hub's curl debug log) and HF_DEBUG. Places: stdout, stderr, the server's
log, every file written (family dir, Hub root, HF_HOME, caches), every request body the server read, and
the argv of every process alive during the run. The canary is not shaped like an hf_ token, so shape-based
redaction cannot hide a leak by luck.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hfrelease.hub import FaultRule, HubServer, serve
from hfrelease.hub import server as hub_server
from tests.publish_family import make_family

CANARY = "cnry" + secrets.token_hex(20)


class _ArgvWatcher:
    """Samples /proc/*/cmdline while a run lasts: the token must never be a process argument."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                with contextlib.suppress(OSError):  # the process ended meanwhile
                    self.seen.add(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            self._stop.wait(0.01)

    def __enter__(self) -> _ArgvWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def bodies(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every request body chunk the Hub server reads."""
    seen: list[bytes] = []
    original = hub_server._Handler._exactly

    def recording(self: hub_server._Handler, count: int) -> Iterator[bytes]:
        for chunk in original(self, count):
            seen.append(chunk)
            yield chunk

    monkeypatch.setattr(hub_server._Handler, "_exactly", recording)
    return seen


@pytest.fixture
def server_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "hub.log"
    handler = logging.FileHandler(path)
    logger = logging.getLogger("hfrelease.hub")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    yield path
    logger.removeHandler(handler)
    logger.setLevel(previous)
    handler.close()


def _run(family: Path, hub: HubServer, tmp_path: Path, *args: str, **env: str) -> tuple[int, str, str, set[str]]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HFRELEASE_"))},
        "HF_TOKEN": CANARY, "HF_HOME": str(tmp_path / "hf-home"), "HFRELEASE_CACHE": str(tmp_path / "cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "0", "COLUMNS": "200", **env,
    }  # fmt: skip
    argv = [sys.executable, "-c", "from hfrelease.cli import main; main()", *args, "publish", str(family),
            "--hub", hub.url]  # fmt: skip
    with _ArgvWatcher() as watcher:
        done = subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr, watcher.seen


def _files_mentioning(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


@pytest.mark.slow
def test_token_never_leaks_on_any_path(tmp_path: Path, bodies: list[bytes], server_log: Path) -> None:
    """Success, 401, 500, crash, -vv and HF_DEBUG runs: the canary appears in no output, file, body or argv."""
    family = make_family(tmp_path / "family", quants=1)
    good = serve(tmp_path / "hub", tokens=[CANARY], fault_injection=True)
    other = serve(tmp_path / "hub-other", tokens=["hf_someone_else_0123456789"])
    try:
        runs = {"success": _run(family, good, tmp_path, "-v")}
        assert runs["success"][0] == 0, runs["success"][2]
        runs["401"] = _run(family, other, tmp_path)
        assert runs["401"][0] == 7, runs["401"][2]
        (family / "q0" / "README.md").write_text("# changed\n")
        (family / "release.toml").write_text((family / "release.toml").read_text().replace('"1.0"', '"1.1"'))
        good.faults.add(FaultRule(endpoint="commit", status=500, times=None))
        runs["500"] = _run(family, good, tmp_path)
        assert runs["500"][0] == 7, runs["500"][2]
        runs["crash"] = _run(family, good, tmp_path, HFRELEASE_DEBUG="1")
        assert "Traceback" in runs["crash"][2]
        runs["debug-log"] = _run(family, good, tmp_path, "-vv")
        assert "Request" in runs["debug-log"][2]  # huggingface_hub logs each request at debug level
        runs["hf-debug"] = _run(family, good, tmp_path, HF_DEBUG="1")
    finally:
        good.shutdown()
        other.shutdown()
    for name, (_, stdout, stderr, argvs) in runs.items():
        assert CANARY not in stdout and CANARY not in stderr, name
        assert not [a for a in argvs if CANARY in a], name
    assert CANARY.encode() not in b"".join(bodies)
    assert CANARY not in server_log.read_text()
    assert _files_mentioning(tmp_path, CANARY.encode()) == []
