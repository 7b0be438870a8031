"""A loopback HTTP server for tool tests: canned replies per path, and a record of every request.

```python
with LocalWebServer() as server:
    server.reply("/search", body=(DATA / "brave.json").read_bytes(), content_type="application/json")
    ...  # point the code under test at server.url
    assert server.hits("/search") == 1
```
"""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    """What the server answers for one path."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    """One request the server got."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


class LocalWebServer:
    """A threading HTTP server on 127.0.0.1 and a free port, started on `__enter__`."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.queued: dict[str, list[Reply]] = {}
        self.held: dict[str, threading.Event] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                self._answer()

            def do_POST(self) -> None:  # noqa: N802
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                parts = urlsplit(self.path)
                with server._lock:
                    server.requests.append(
                        Request(
                            method=self.command,
                            path=parts.path,
                            query=parse_qs(parts.query),
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=self.rfile.read(length) if length else b"",
                        )
                    )
                gate = server.held.get(parts.path)
                if gate is not None:
                    gate.wait()
                with server._lock:
                    queued = server.queued.get(parts.path)
                    reply = (
                        queued.pop(0)
                        if queued
                        else server.replies.get(parts.path, Reply(404, b"not found"))
                    )
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:  # the client is gone (a killed worker held at a gate)
                    return

            def log_message(self, *args: object) -> None:
                return

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reply(
        self,
        path: str,
        *,
        body: bytes | str = b"",
        status: int = 200,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer requests for `path` (any query string) with this reply from now on."""
        self.replies[path] = _reply(body, status, content_type, headers)

    def reply_once(
        self,
        path: str,
        *,
        body: bytes | str = b"",
        status: int = 200,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next request for `path` with this reply (before any `reply`), once."""
        with self._lock:
            self.queued.setdefault(path, []).append(_reply(body, status, content_type, headers))

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.reply(path, status=status, headers={"Location": location})

    def hold(self, path: str) -> None:
        """Keep every request for `path` waiting (after it is recorded) until `release(path)`."""
        self.held[path] = threading.Event()

    def release(self, path: str) -> None:
        """Answer the requests `hold(path)` kept waiting, and the later ones at once."""
        self.held.pop(path).set()

    def hits(self, path: str) -> int:
        """How many requests for `path` the server got."""
        with self._lock:
            return sum(1 for request in self.requests if request.path == path)

    def last(self, path: str) -> Request:
        with self._lock:
            return [request for request in self.requests if request.path == path][-1]

    def __enter__(self) -> LocalWebServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for gate in self.held.values():
            gate.set()
        self._server.shutdown()
        self._server.server_close()


def _reply(
    body: bytes | str, status: int, content_type: str | None, headers: dict[str, str] | None
) -> Reply:
    all_headers = dict(headers or {})
    if content_type is not None:
        all_headers["Content-Type"] = content_type
    return Reply(status, body.encode("utf-8") if isinstance(body, str) else body, all_headers)
