"""The codec server cannot be flooded: a body is read only with one plain `Content-Length` below the
cap, and never past it; a flood of 300 MB leaves the server's memory where it was.

Every request here goes over a raw socket, as an attacker would send it, to a `sleuth
codec-server` process of its own (its memory is read from `/proc/<pid>/status`).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from sleuth.workers.codec import AESGCMCodec, new_key
from sleuth.workers.codec_server import MAX_BODY_BYTES
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
FLOOD_BYTES = 300 << 20
ALLOWED_GROWTH_KIB = 8 << 10
"""How much the server's peak resident memory may grow while it is flooded (8 MiB)."""


@contextlib.contextmanager
def codec_server(key: str) -> Iterator[tuple[int, int]]:
    """A `sleuth codec-server` process on a free port: (port, pid)."""
    port = free_ports()
    process = subprocess.Popen(
        [sys.executable, "-c", "from sleuth.workers.cli import main; main()", "codec-server",
         "--port", str(port)],
        env={**os.environ, "SLEUTH_ENCRYPTION_KEY": key, "PYTHONPATH": str(ROOT),
             "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("codec server on "), first
        yield port, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def exchange(port: int, request: bytes) -> bytes:
    """Send `request`, close the sending side, and read the answer to its end."""
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(30)) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def post_head(*headers: str) -> bytes:
    lines = ["POST /decode HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    return ("\r\n".join([*lines, *headers]) + "\r\n\r\n").encode()


def status(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    assert match, f"no HTTP answer: {answer[:200]!r}"
    return int(match.group(1))


def peak_and_current_kib(pid: int) -> tuple[int, int]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0])


def decode_request(key: bytes) -> bytes:
    sealed = AESGCMCodec([key]).encrypt(Payload(metadata={"encoding": b"json/plain"}, data=b"1"))
    body = json_format.MessageToJson(Payloads(payloads=[sealed])).encode()
    return post_head(f"Content-Length: {len(body)}") + body


BAD_LENGTHS = [
    ("missing", (), {411}),
    ("negative", ("Content-Length: -1",), {400}),
    ("non-numeric", ("Content-Length: abc",), {400}),
    ("exponent", ("Content-Length: 1e3",), {400}),
    ("hex", ("Content-Length: 0x10",), {400}),
    ("signed", ("Content-Length: +10",), {400}),
    ("two lengths", ("Content-Length: 2", "Content-Length: 200"), {400}),
    ("chunked", ("Transfer-Encoding: chunked",), {411}),
    ("over the cap", (f"Content-Length: {MAX_BODY_BYTES + 1}",), {413}),
    ("5,000 digits", ("Content-Length: " + "9" * 5000,), {413}),
]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
def test_a_missing_negative_or_non_numeric_length_is_refused_and_the_server_goes_on() -> None:
    key = new_key()
    with codec_server(key) as (port, _):
        for name, headers, expected in BAD_LENGTHS:
            # The body that follows must not be read: the server answers from the headers alone.
            answer = exchange(port, post_head(*headers) + b'{"payloads": []}')
            assert status(answer) in expected, (name, answer[:300])
            assert b"Connection: close" in answer, name
        answer = exchange(port, decode_request(base64.b64decode(key)))
        assert status(answer) == 200, answer[:300]
        decoded = json_format.Parse(answer.split(b"\r\n\r\n", 1)[1], Payloads())
        assert decoded.payloads[0].data == b"1"


FLOOD_HEADS = [
    post_head("Content-Length: -1"),
    post_head("Content-Length: abc"),
    post_head(f"Content-Length: {FLOOD_BYTES}"),
    post_head(),
    # A small length and far more body after it: only the declared bytes are read.
    post_head("Content-Length: 10"),
]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
def test_300_mb_sent_to_the_codec_server_leave_its_memory_flat() -> None:
    key = new_key()
    chunk = b"x" * (1 << 20)
    with codec_server(key) as (port, pid):
        # Warm up every path first, so the baseline includes the code and buffers they use.
        for head in FLOOD_HEADS:
            exchange(port, head)
        assert status(exchange(port, decode_request(base64.b64decode(key)))) == 200
        peak_before, current_before = peak_and_current_kib(pid)

        sent, connections = 0, 0
        deadline = time.monotonic() + scaled(300)
        while sent < FLOOD_BYTES and time.monotonic() < deadline:
            head = FLOOD_HEADS[connections % len(FLOOD_HEADS)]
            connections += 1
            with socket.create_connection(("127.0.0.1", port), timeout=scaled(30)) as sock:
                try:
                    sock.sendall(head)
                    while sent < FLOOD_BYTES and time.monotonic() < deadline:
                        sock.sendall(chunk)
                        sent += len(chunk)
                except OSError:
                    pass  # the server closed the connection without reading on: the point
        peak_after, current_after = peak_and_current_kib(pid)
        assert status(exchange(port, decode_request(base64.b64decode(key)))) == 200

    print(
        f"flood: {sent >> 20} MiB over {connections} connections; server peak RSS "
        f"{peak_before} -> {peak_after} KiB, RSS {current_before} -> {current_after} KiB"
    )
    assert sent >= FLOOD_BYTES, f"only {sent >> 20} MiB sent before the deadline"
    assert peak_after - peak_before < ALLOWED_GROWTH_KIB
