"""A local OpenAI-compatible chat server for tests: canned, malformed, slow and cut answers.

``with ChatStub() as stub:`` serves ``POST /v1/chat/completions`` on 127.0.0.1 (a free port) in
a thread; ``stub.url`` is the base URL. Each request takes the next scripted reply off
``stub.replies`` (a queue; the last one stays and repeats): a ``dict`` or ``list`` is sent as
the JSON content of a chat completion, a ``str`` as raw content (not JSON, say), ``Reply(...)``
for anything else — an HTTP status, a delay, a dropped connection, a body that is no chat
completion. Every request's JSON body is kept in ``stub.requests``, its headers in
``stub.headers``. Never a network call beyond the loopback.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Reply:
    content: Any = None  # JSON-encoded into choices[0].message.content unless a str
    status: int = 200
    delay_s: float = 0.0
    disconnect: bool = False  # close the connection without an answer
    raw_body: str | None = None  # sent as the whole body instead of a chat completion


class ChatStub:
    def __init__(self, *replies: Any) -> None:
        self.replies: list[Any] = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with stub._lock:
                    stub.requests.append(json.loads(body))
                    stub.headers.append(dict(self.headers))
                    if len(stub.replies) > 1:
                        reply = stub.replies.pop(0)
                    else:
                        reply = stub.replies[0] if stub.replies else Reply({"facts": []})
                if not isinstance(reply, Reply):
                    reply = Reply(reply)
                if self.path != "/v1/chat/completions":
                    reply = Reply(status=404, raw_body="not found")
                time.sleep(reply.delay_s)
                if reply.disconnect:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                content = reply.content
                if not isinstance(content, str):
                    content = json.dumps(content)
                out = reply.raw_body
                if out is None:
                    out = json.dumps({"choices": [{"message": {"content": content}}]})
                data = out.encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def user_document(self, k: int = -1) -> dict[str, Any]:
        """The JSON document of request ``k``'s user message."""
        doc: dict[str, Any] = json.loads(self.requests[k]["messages"][-1]["content"])
        return doc

    def __enter__(self) -> ChatStub:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
