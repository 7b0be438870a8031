"""Temporal's remote codec protocol over HTTP, so the Web UI (and `temporal --codec-endpoint`)
shows decrypted payloads.

`POST /encode` and `POST /decode` take `{"payloads": [{"metadata": {...}, "data": "..."}]}` (the
JSON form of `temporal.api.common.v1.Payloads`, bytes in base64) and answer in the same shape.
Browsers may call it only from the allowed origins (the Web UI's), answered with CORS headers.
It listens on loopback by default: anyone who can reach it can decrypt, as anyone who can reach
the Web UI can read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from sleuth.workers.codec import AESGCMCodec, EncryptionKeyError

MAX_BODY_BYTES = 16 << 20
"""Largest request body accepted (Temporal's own payload limit is lower)."""
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"


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

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
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
            self._reply(HTTPStatus.NOT_FOUND, b"POST /encode or /decode\n")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"request body too large\n")
            return
        try:
            payloads = json_format.Parse(self.rfile.read(length), Payloads())
            convert = self.server.codec.encrypt if action == "encode" else self.server.codec.decrypt
            answer = Payloads(payloads=[convert(payload) for payload in payloads.payloads])
        except (json_format.ParseError, EncryptionKeyError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, f"{exc}\n".encode())
            return
        self._reply(HTTPStatus.OK, json_format.MessageToJson(answer).encode(), "application/json")
