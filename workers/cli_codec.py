"""`sleuth codec-server`: decrypt payloads for the Temporal Web UI (see `workers/codec.py`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sleuth.workers.codec import KEY_ENV, KEY_FILE_ENV, configured_codec, write_key_file
from sleuth.workers.codec_server import CodecServer

DEFAULT_PORT = 8234
DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "codec-server",
        help="serve Temporal's codec protocol so the Web UI shows decrypted payloads",
        description=(
            f"Answer POST /encode and /decode with the keys of ${KEY_ENV} / ${KEY_FILE_ENV}. "
            "Point the Web UI's codec endpoint at it (`sleuth server` does that by itself when a "
            "key is set). --new-key FILE makes a key file instead."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8234)")
    parser.add_argument(
        "--origin",
        action="append",
        metavar="URL",
        help="a Web UI origin browsers may call from (repeatable; default "
        "http://localhost:8233 and http://127.0.0.1:8233)",
    )
    parser.add_argument(
        "--new-key", type=Path, metavar="FILE", help="write a fresh key to FILE (0600) and exit"
    )
    parser.set_defaults(func=run_codec_server_command)


def run_codec_server_command(args: argparse.Namespace) -> int:
    if args.new_key is not None:
        path = write_key_file(args.new_key.expanduser())
        print(f"wrote a new key to {path}; use it with {KEY_FILE_ENV}={path}")
        return 0
    codec = configured_codec()
    if codec is None:
        print(
            f"sleuth: no encryption key: set {KEY_ENV} or {KEY_FILE_ENV} "
            "(`sleuth codec-server --new-key FILE` makes a key file)",
            file=sys.stderr,
        )
        return 1
    server = CodecServer(args.host, args.port, codec, args.origin or DEFAULT_ORIGINS)
    print(f"codec server on {server.url} (key {codec.active_key_id}); Ctrl-C stops it", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
