"""A local OpenAI-compatible completions server for contract tests (127.0.0.1, bounded).

``OpenAIServer(script)`` answers each ``POST /v1/completions`` with the next action of ``script``
(the last one repeats): ``"ok"`` (a completion; ``text`` sets it), ``"500"``, ``"503"``,
``"malformed"`` (a body that is not JSON), ``"no-choices"``, ``"redirect"`` (302 to ``location``),
``("sleep", seconds)`` (answers late), ``("text", "...")`` (a completion with that text),
``("fn", f)`` (a completion with the text ``f(request body)``). Every
connection and request body is recorded. The server stops with the ``with`` block; a request is
never held longer than ``max_sleep`` seconds, so a test cannot hang on it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OpenAIServer:
    def __init__(self, script: list[Any] | None = None, *, max_sleep: float = 5.0) -> None:
        self.script = list(script or ["ok"])
        self.max_sleep = max_sleep
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.location = "http://127.0.0.1:9/elsewhere"
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self) -> None:
                with server._lock:
                    server.connections += 1
                super().setup()

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    index = len(server.requests)
                    server.requests.append(
                        {"path": self.path, "body": body, "host": self.headers.get("Host")}
                    )
                    action = server.script[min(index, len(server.script) - 1)]
                server._answer(self, action, body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _answer(self, handler: BaseHTTPRequestHandler, action: Any, body: dict[str, Any]) -> None:
        text = "A completion."
        if isinstance(action, tuple) and action[0] == "sleep":
            time.sleep(min(float(action[1]), self.max_sleep))
            action = "ok"
        if isinstance(action, tuple) and action[0] == "text":
            text, action = str(action[1]), "ok"
        if isinstance(action, tuple) and action[0] == "fn":
            text, action = str(action[1](body)), "ok"
        if action in ("500", "503"):
            self._send(handler, int(action), b'{"error": "overloaded"}')
        elif action == "malformed":
            self._send(handler, 200, b'{"choices": [{"text": "cut off')
        elif action == "no-choices":
            self._send(handler, 200, json.dumps({"object": "text_completion"}).encode())
        elif action == "redirect":
            handler.send_response(302)
            handler.send_header("Location", self.location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        else:
            payload = {
                "id": "cmpl-test",
                "object": "text_completion",
                "model": body.get("model", ""),
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
            }
            self._send(handler, 200, json.dumps(payload).encode())

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, raw: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            handler.wfile.write(raw)  # the client may have given up (a timeout test)

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)
