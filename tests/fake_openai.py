"""A small fake OpenAI-compatible server, for faults a real vLLM server cannot be made to show on demand.

It stalls (answers the first N requests, then holds every later one open without a byte) and is slow
(each answer takes seconds while its token counters keep moving, as a server that works but cannot
meet the request timeout). Everything else about it is as plain as vLLM's API: `/v1/models`,
`/v1/chat/completions` and vLLM's Prometheus counters on `/metrics`. Its answers are a function of the
prompt, so two runs of a gate against it give the same samples.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    """The server and its behaviour; `url` is its base URL. Stop with `close()`."""

    def __init__(self, *, model: str, answer_limit: int | None = None, delay: float = 0.0) -> None:
        self.model = model
        self.answer_limit = answer_limit  # answer this many chat requests, then stall
        self.delay = delay  # seconds each answer takes (counters move meanwhile)
        self.answered = 0
        self.prompts: list[str] = []  # every chat prompt answered, in order
        self.payloads: list[dict[str, Any]] = []  # every request body received, in order
        self.counter = 0.0  # vllm:generation_tokens_total
        self.in_flight = 0
        self._lock = threading.Lock()
        self._release = threading.Event()
        handler = self._handler()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def metrics(self) -> str:
        with self._lock:
            if self.in_flight and self.delay:
                self.counter += 1  # a slow server still generates: its counters move
            value = self.counter
        return f'vllm:generation_tokens_total{{model_name="{self.model}"}} {value}\n'

    def answer(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The completion for `payload`, or None (after holding the request) when the server stalls."""
        messages = payload.get("messages") or []
        prompt = str(messages[-1].get("content", "")) if messages else ""
        with self._lock:
            self.payloads.append(payload)
            stalled = self.answer_limit is not None and self.answered >= self.answer_limit
            self.in_flight += 1
        try:
            if stalled:
                self._release.wait()
                return None
            if self.delay:
                time.sleep(self.delay)
        finally:
            with self._lock:
                self.in_flight -= 1
        numbers = [int(n) for n in re.findall(r"\d+", prompt)]
        text = str(sum(numbers[-2:])) if numbers else "0"
        with self._lock:
            self.answered += 1
            self.prompts.append(prompt)
            self.counter += len(text)
        return {
            "id": "fake", "object": "chat.completion", "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": fake.model}]}).encode())
                elif self.path == "/metrics":
                    self._send(200, fake.metrics().encode(), "text/plain")
                elif self.path == "/health":
                    self._send(200, b"")
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                result = fake.answer(payload)
                if result is None:
                    self.close_connection = True
                    return
                self._send(200, json.dumps(result).encode())

        return Handler
