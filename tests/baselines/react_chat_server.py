"""A scripted OpenAI-compatible chat-completions server on loopback, for the ReAct tests.

``ScriptedChat(script)`` serves ``POST /v1/chat/completions``; ``script(request_body, n)`` returns
``(status, body)`` where a dict body is sent as JSON and a str as-is. Every request body is kept in
``requests``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def completion(content: str = "", tool_calls: list | None = None, prompt_tokens: int = 100,
               completion_tokens: int = 20) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return {"id": "cmpl-1", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def tool_call(name: str, arguments: Any, cid: str = "c1") -> dict[str, Any]:
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}


class ScriptedChat:
    def __init__(self, script: Callable[[dict, int], tuple[int, Any]]):
        self.script = script
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": "not found"})
                    return
                outer.requests.append(body)
                outer.auth.append(self.headers.get("Authorization"))
                status, reply = outer.script(body, len(outer.requests) - 1)
                self._send(status, reply)

            def _send(self, status, reply):
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedChat":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
