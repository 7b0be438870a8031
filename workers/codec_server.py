"""Temporal's remote codec protocol over HTTP, so the Web UI (and `temporal --codec-endpoint`)
shows decrypted payloads.

`POST /encode` and `POST /decode` take `{"payloads": [{"metadata": {...}, "data": "..."}]}` (the
JSON form of `temporal.api.common.v1.Payloads`, bytes in base64) and answer in the same shape.
The Web UI sends failures the same way: a failure's encoded attributes (its message and stack
trace, see `workers/codec.py`) arrive as one payload of such a list. Browsers may call it only
from the allowed origins (the Web UI's), answered with CORS headers. It listens on loopback by
default: anyone who can reach it can decrypt, as anyone who can reach the Web UI can read.

A request needs one decimal `Content-Length` of at most `MAX_BODY_BYTES` (else 411, 400 or 413,
and the connection is closed unread), so each request holds at most one capped body in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from sleuth.runtime.artifacts import ArtifactNotFoundError
from sleuth.workers.codec import AESGCMCodec, EncryptionKeyError
from sleuth.workers.payload_storage import resolve

MAX_BODY_BYTES = 16 << 20
"""Largest request body accepted (Temporal's own payload limit is lower)."""
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"
READ_TIMEOUT_SECONDS = 30.0
"""A connection that sends nothing for this long is closed (a slow sender holds no thread)."""


class CodecServer(ThreadingHTTPServer):
    """An HTTP server answering the codec protocol with `codec`."""

    daemon_threads = True

    def __init__(self, host: str, port: int, codec: AESGCMCodec, origins: Iterable[str]):
        self.codec = codec
        self.origins = {origin.rstrip("/") for origin in origins}
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://{'localhost' if host in ('127.0.0.1', '::1') else host}:{port}"

    def start_in_thread(self) -> threading.Thread:
        """Serve on a daemon thread (for a process that does other work, like `sleuth server`)."""
        thread = threading.Thread(target=self.serve_forever, name="codec-server", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: CodecServer
    timeout = READ_TIMEOUT_SECONDS

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _cors(self) -> None:
        origin = (self.headers.get("Origin") or "").rstrip("/")
        if origin and origin in self.server.origins:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
            self.send_header("Vary", "Origin")

    def _reply(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str = "text/plain",
        *,
        close: bool = False,
    ) -> None:
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_OPTIONS(self) -> None:
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors()
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        action = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if action not in ("encode", "decode"):
            self._refuse(HTTPStatus.NOT_FOUND, "POST /encode or /decode")
            return
        body = self._read_body()
        if body is None:
            return
        try:
            payloads = json_format.Parse(body, Payloads(), ignore_unknown_fields=True)
            codec = self.server.codec
            if action == "encode":
                answer = Payloads(payloads=[codec.encrypt(p) for p in payloads.payloads])
            else:
                # An offloaded payload (workers/payload_storage.py) is read from the artifact
                # store first, so the Web UI shows it like any other.
                answer = Payloads(payloads=[codec.decrypt(resolve(p)) for p in payloads.payloads])
        except (json_format.ParseError, EncryptionKeyError, ArtifactNotFoundError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, f"{exc}\n".encode())
            return
        self._reply(HTTPStatus.OK, json_format.MessageToJson(answer).encode(), "application/json")

    def _read_body(self) -> bytes | None:
        """The request body, read up to its declared length and never past `MAX_BODY_BYTES`;
        None once a refusal is sent. Anything but one plain decimal `Content-Length` is refused
        before a byte of the body is read, and the connection is closed, so what the client
        sends after it is never read."""
        if self.headers.get("Transfer-Encoding") is not None:
            self._refuse(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
            return None
        declared = self.headers.get_all("Content-Length") or []
        if not declared:
            self._refuse(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
            return None
        text = declared[0].strip()
        if len(declared) > 1 or not text.isascii() or not text.isdigit():
            self._refuse(HTTPStatus.BAD_REQUEST, "Content-Length must be one decimal number")
            return None
        # Compared as text first: a 5,000-digit number is too large for int() to parse.
        length = int(text) if len(text) <= len(str(MAX_BODY_BYTES)) else MAX_BODY_BYTES + 1
        if length > MAX_BODY_BYTES:
            self._refuse(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"request body too large (at most {MAX_BODY_BYTES} bytes)",
            )
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            return None
        return body

    def _refuse(self, status: HTTPStatus, reason: str) -> None:
        self.close_connection = True
        self._reply(status, f"{reason}\n".encode(), close=True)
